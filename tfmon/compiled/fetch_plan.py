"""Fetch leaves, and FetchPlan: what one call structure of `run` fetches.

A `run(fetches, feed_dict)` call is flattened into leaves. Each leaf is one of:
a step function (any callable), `op(fn)`, a variable, a name, a plain value
(tensor, numpy or Python number), None, or one of the requests hooks make
through the session: `RecordSummaries` (SummarySaverHook) and `StopIf`
(NanTensorHook). A leaf's kind depends only on its Python
type, so classifying a leaf on the hot path is one dict lookup.
"""

import numbers
import re
import sys

import numpy as np
import tensorflow as tf

from tfmon.compiled import graph_capture


# Leaf kinds, cached per Python type.
(NONE, NAME, STEP, OP, VARIABLE, VALUE, SUMMARIES, STOP_IF, INVALID) = range(9)

# Layout codes for leaves that are not outputs of the compiled call.
LAYOUT_NONE = -1
LAYOUT_VALUE = -2


class StepOp:
  """A step function whose results stay on the device: TF1's `train_op`.

  Fetching `op(fn)` runs `fn` like any step function, but its leaf returns None,
  so a loop that never reads the step's outputs pays no device-to-host copy.
  Hooks can still fetch the names of the dict it returns.
  """

  __slots__ = ('fn',)

  def __init__(self, fn):
    if not callable(fn):
      raise TypeError(f'op() takes a step function (a callable); got {fn!r} of '
                      f'type {type(fn).__name__}.')
    self.fn = fn

  def __eq__(self, other):
    return type(other) is StepOp and other.fn == self.fn

  def __hash__(self):
    return hash((StepOp, self.fn))

  def __repr__(self):
    return f'op({describe(self.fn)})'


def op(fn):
  """Returns a fetch that runs step function `fn` without returning its results.

  Args:
    fn: A step function, as any callable leaf of `run` fetches.

  Returns:
    A fetch whose result is None.

  Raises:
    TypeError: if `fn` is not callable.
  """
  return StepOp(fn)


class RecordSummaries:
  """Fetch: run this call under `writer`, recording its tf.summary calls if `record`.

  Summaries are stamped with the global step before the call plus one: the
  post-step global step of a step that increments it by one, as v1's
  SummarySaverHook stamped them. The leaf's result is None.

  Args:
    writer: A `tf.summary.SummaryWriter`.
    record: Whether this call records.
    global_step: The global step variable.
    write_graph: Whether to write the call's graph (for TensorBoard's Graphs tab).
  """

  __slots__ = ('writer', 'record', 'global_step', 'write_graph')

  def __init__(self, writer, record, global_step, write_graph=False):
    self.writer = writer
    self.record = record
    self.global_step = global_step
    self.write_graph = write_graph


class StopIf:
  """Fetch: the tensor named `name`; in a fused run, also ends the loop after a
  step where `predicate(tensor)` holds (how NanTensorHook stops at the NaN step).

  Args:
    name: A key of a dict returned by a step function of the call.
    predicate: A function from the tensor to a boolean tensor (any element true
      stops the loop).
  """

  __slots__ = ('name', 'predicate')

  def __init__(self, name, predicate):
    self.name = name
    self.predicate = predicate


_kind_by_type = {type(None): NONE, str: NAME, StepOp: OP, RecordSummaries: SUMMARIES,
                 StopIf: STOP_IF}


# Every type met as a fetch leaf so far (a live view: it grows with leaf_kind).
LEAF_TYPES = _kind_by_type.keys()


def describe(fn):
  return getattr(fn, '__qualname__', None) or getattr(fn, '__name__', None) or repr(fn)


def is_variable(leaf):
  if isinstance(leaf, tf.Variable):
    return True
  keras = sys.modules.get('keras')  # a Keras variable exists only if Keras is loaded
  return keras is not None and isinstance(leaf, getattr(keras, 'Variable', ()))


def _classify(leaf):
  if is_variable(leaf):
    return VARIABLE
  if isinstance(leaf, (tf.Tensor, np.ndarray, np.generic, numbers.Number)):
    return VALUE
  if callable(leaf):
    return STEP
  return INVALID


def leaf_kind(leaf):
  kind = _kind_by_type.get(type(leaf))
  if kind is None:
    kind = _kind_by_type[type(leaf)] = _classify(leaf)
  return kind


def leaf_key(leaf):
  """The part of the cache key of a call that this leaf contributes."""
  kind = leaf_kind(leaf)
  if kind == VALUE:
    return VALUE  # values are returned as they are and never enter the call
  if kind == VARIABLE or kind == INVALID:
    return (kind, id(leaf))  # variables are unhashable; the plan keeps them alive
  if kind == SUMMARIES:  # whether this call records is an input, not structure
    return (kind, id(leaf.writer), id(leaf.global_step))
  if kind == STOP_IF:
    return (kind, leaf.name, leaf.predicate)
  if kind == STEP:
    try:
      hash(leaf)
    except TypeError:
      return (STEP, id(leaf))
  return leaf


def check_fetches(fetches, arg_name):
  """Raises TypeError, naming `arg_name`, if a leaf of `fetches` is not fetchable.

  What `run` can fetch is SPEC section 2; this checks it when a hook is built,
  rather than at the first run that would fetch it (which, for FinalOpsHook, is
  the end of training).

  Args:
    fetches: A nest of fetch leaves.
    arg_name: How the caller names `fetches` in the message, e.g.
      "LoggingTensorHook tensors['loss']".

  Raises:
    TypeError: if a leaf is neither a step function, `op(fn)`, a variable, a
      name, a tensor or numpy value, nor None; or is a graph tensor.
  """
  for leaf in tf.nest.flatten(fetches):
    if _in_captured_graph(leaf):
      continue  # a session on that graph runs it
    kind = leaf_kind(leaf)
    if kind == VALUE and tf.is_symbolic_tensor(leaf):
      raise TypeError(
          f'{arg_name} is the graph tensor {leaf!r}. tfmon runs eagerly: give the '
          'step function that computes it, or its name.')
    if kind in (INVALID, SUMMARIES):
      raise TypeError(
          f'{arg_name} holds {leaf!r} of type {type(leaf).__name__}, which run() '
          'cannot fetch. Give a tensor name (str), a step function (a callable), a '
          'tf.Variable, a tensor or numpy value, alone or in lists, tuples and dicts.')


def _in_captured_graph(leaf):
  """Whether `leaf` is an element of a captured TF1 graph (a tfmon.Graph)."""
  return (isinstance(leaf, (tf.Tensor, tf.Operation)) and
          isinstance(getattr(leaf, 'graph', None), graph_capture.Graph))


def unique_variables(variables):
  """`variables` less None and repeats (variables are unhashable), in order."""
  return list({id(v): v for v in variables if v is not None}.values())


def tensor_name(name):
  """A fetched name as a tensor name: 'loss' is 'loss:0', as TF1 resolved it."""
  return name if ':' in name else name + ':0'


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def read(variable):
  if isinstance(variable, tf.Variable):
    return variable.read_value()
  return tf.convert_to_tensor(variable)  # a Keras variable


_OP_TYPE_SUFFIX = r'(_\d+)?'


def user_named_tensors(graph):
  """Tensor names in `graph` that someone chose (not TF's op-type defaults)."""
  names = []
  for graph_op in graph.get_operations():
    base = graph_op.name.rsplit('/', 1)[-1]
    if re.fullmatch(re.escape(graph_op.type) + _OP_TYPE_SUFFIX, base):
      continue
    if 'gradient_tape/' in graph_op.name or not graph_op.outputs:
      continue
    names.append(graph_op.outputs[0].name)
  return names


class FetchPlan:
  """What one call structure fetches, and where each leaf's result comes from.

  The plan lists the distinct step functions (in flattened order, each once:
  TF1 ran a fetched op once), variables, names and stop conditions of a call,
  and per leaf an entry of `layout`: `(STEP, step index)`, `(VARIABLE,
  variable)`, `(NAME, name)`, `LAYOUT_NONE` or `LAYOUT_VALUE`. It computes
  nothing: CompiledCall does, from the union of what its calls' plans ask.

  Args:
    flat_fetches: The flattened fetches of a call.
    feed_keys: The feed_dict keys of the call.
    loop_leaves: For a fused call, how many leading leaves are the caller's
      (their step functions form the loop); None for a call of one step.

  Raises:
    TypeError: a leaf of an unsupported type, or a graph tensor.
    ValueError: two summary writers in one call.
  """

  def __init__(self, flat_fetches, feed_keys, loop_leaves=None):
    self.feed_keys = tuple(feed_keys)
    self.steps = []       # step functions, in flattened order, each once
    self.step_keys = []   # their leaf keys
    self.loop_step_count = None if loop_leaves is None else 0
    self.variables = []
    self.names = []
    self.stop_ifs = []    # (name, predicate)
    self.returning = []   # indices of steps whose results are fetched
    self.summaries = None  # the RecordSummaries leaf of the call, if any
    self.summaries_position = None
    self.layout = []
    for position, leaf in enumerate(flat_fetches):
      kind = leaf_kind(leaf)
      if kind == NONE:
        self.layout.append(LAYOUT_NONE)
      elif kind == SUMMARIES:
        if self.summaries is not None and leaf_key(leaf) != leaf_key(self.summaries):
          raise ValueError(
              'Two summary writers asked to record the same call; a call records '
              'into one writer. Give SummarySaverHooks the same output_dir.')
        self.summaries, self.summaries_position = leaf, position
        self.layout.append(LAYOUT_NONE)
      elif kind == VALUE:
        if tf.is_symbolic_tensor(leaf):
          raise TypeError(
              f'Fetch {leaf!r} is a graph tensor. tfmon runs eagerly: fetch the '
              'step function that computes it, or its name.')
        self.layout.append(LAYOUT_VALUE)
      elif kind == VARIABLE:
        if not any(v is leaf for v in self.variables):
          self.variables.append(leaf)
        self.layout.append((VARIABLE, leaf))
      elif kind == STOP_IF or kind == NAME:
        name = leaf.name if kind == STOP_IF else leaf
        if name not in self.names:
          self.names.append(name)
        if kind == STOP_IF and (name, leaf.predicate) not in self.stop_ifs:
          self.stop_ifs.append((name, leaf.predicate))
        self.layout.append((NAME, name))
      elif kind == STEP or kind == OP:
        fn = leaf.fn if kind == OP else leaf
        key = leaf_key(fn)
        if key not in self.step_keys:
          self.step_keys.append(key)
          self.steps.append(fn)
          if loop_leaves is not None and position < loop_leaves:
            self.loop_step_count = len(self.steps)
        index = self.step_keys.index(key)
        if kind == OP:
          self.layout.append(LAYOUT_NONE)
        else:
          if index not in self.returning:
            self.returning.append(index)
          self.layout.append((STEP, index))
      else:
        raise TypeError(
            f'Fetch argument {leaf!r} has invalid type {type(leaf).__name__}. '
            'Fetch a step function (a callable), tfmon.train.op(fn), a tf.Variable, '
            'a tensor name (str), a tensor or numpy value, or None, alone or in '
            'lists, tuples, dicts and namedtuples.')
    for key in self.feed_keys:
      if not isinstance(key, str):
        raise TypeError(
            f'feed_dict key {key!r} is a {type(key).__name__}. tfmon feeds step '
            'functions by parameter name: use the parameter name as the key, e.g. '
            "feed_dict={'images': batch}.")


def pack(structure, flat_results):
  """tf.nest.pack_sequence_as for the nests fetches are made of, on the hot path.

  tf.nest.pack_sequence_as spends ~17us per list or tuple node on a typing-Protocol
  isinstance check (TF 2.21): more than the rest of a hooked run's Python work. This
  packs lists, tuples, namedtuples and dicts in tf.nest's order (dicts by sorted
  key, keeping the caller's key order in the result) and leaves other nests to it.
  """
  return _pack_node(structure, iter(flat_results))


def _pack_node(node, results):
  # A module-level function, not a closure: a recursive closure is a reference
  # cycle, and one per run kept Python's garbage collector busy.
  node_type = type(node)
  if node_type is list:
    return [_pack_node(child, results) for child in node]
  if node_type is tuple:
    return tuple(_pack_node(child, results) for child in node)
  if node_type is dict:
    packed = {key: _pack_node(node[key], results) for key in _key_order(node)}
    return {key: packed[key] for key in node}
  if node_type in LEAF_TYPES:
    return next(results)
  if isinstance(node, tuple) and hasattr(node_type, '_fields'):
    return node_type(*(_pack_node(child, results) for child in node))
  if tf.nest.is_nested(node):
    leaves = [next(results) for _ in tf.nest.flatten(node)]
    return tf.nest.pack_sequence_as(node, leaves)
  return next(results)


def flatten(structure):
  """tf.nest.flatten, except that a dict whose keys do not sort is taken in its
  own order, as TF1's Session took it: TF's `_HookedSession` fetches
  `{'caller': fetches, hook: ...}`, keyed by hook objects. `pack` undoes it."""
  try:
    return tf.nest.flatten(structure)
  except TypeError:
    flat = []
    _flatten_node(structure, flat)
    return flat


def _key_order(mapping):
  try:
    return sorted(mapping)
  except TypeError:  # keys of several types: TF1's fetch dicts keyed by hooks
    return list(mapping)


def _flatten_node(node, flat):
  node_type = type(node)
  if node_type is dict:
    for key in _key_order(node):
      _flatten_node(node[key], flat)
  elif node_type in (list, tuple) or (isinstance(node, tuple) and hasattr(node_type, '_fields')):
    for child in node:
      _flatten_node(child, flat)
  elif node_type not in LEAF_TYPES and tf.nest.is_nested(node):
    flat.extend(flatten(node))
  else:
    flat.append(node)

