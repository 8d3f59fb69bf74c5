"""What one compiled call adds to the global step, read from its traced graph.

A session that tracks the global step (to call only the hooks due) would
otherwise read it back from every run: one more op and one more output, ~10 µs
a run on a small model (BUILD_NOTES.md). When the traced call provably adds a
constant, the session counts instead.
"""

import tensorflow as tf

_READS = frozenset(['ReadVariableOp'])
_SIGNS = {'AssignAddVariableOp': 1, 'AssignSubVariableOp': -1}


def constant_increment(graph, variable):
  """Returns what every run of `graph` adds to `variable`, if that is known.

  Known means: every op of `graph` that uses the variable reads it, or adds or
  subtracts a value fixed at trace time, at the graph's top level, where TF2
  runs every stateful op once. A use inside control flow or a nested function,
  an assignment, or a data-dependent increment makes it unknown. A graph that
  does not use the variable, or only reads it, adds 0.

  Args:
    graph: The FuncGraph of a traced call.
    variable: The global step variable.

  Returns:
    The increment as an int, or None if unknown.
  """
  if isinstance(variable, tf.distribute.DistributedValues):
    return None  # one variable per replica: read back, not counted
  handle = getattr(variable, 'handle', None)
  if handle is None:  # not a resource variable: unknown
    return None
  placeholder = next((internal for external, internal in graph.captures
                      if external is handle), None)
  if placeholder is None:
    return 0
  total = 0
  for op in placeholder.consumers():
    if op.type in _READS:
      continue
    sign = _SIGNS.get(op.type)
    value = None if sign is None else tf.get_static_value(op.inputs[1])
    if value is None or getattr(value, 'shape', ()) != ():
      return None
    total += sign * int(value)
  return total
