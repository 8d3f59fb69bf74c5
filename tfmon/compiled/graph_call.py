"""GraphCall: `run` on a captured TF1 graph, as TF1's `Session.run` ran it.

A run's fetches are the graph's tensors, operations and names ('loss:0',
'train_op'), its variables, and values, in any nest; its feeds are keyed by
placeholders (or any tensor), by object or by name. Each set of fetches and
fed tensors is one function pruned from the graph, made on first use and kept:
what a run does not fetch does not run, as in TF1, and a hook's
`session.run(loss)` never trains.

Feeds are converted to the dtype of the tensor they feed (a float64 numpy
batch fed to a float32 placeholder stays float32, as TF1 did) and checked
against its shape with TF1's message. A fetched variable is read before the
call: its value when the run starts.
"""

import difflib

import numpy as np
import tensorflow as tf

from tfmon.compiled import compiled_call
from tfmon.compiled import fetch_plan

# How a flat fetch leaf becomes a result.
_OUTPUT, _OPERATION, _VARIABLE, _READ_AFTER, _VALUE, _NONE = range(6)


class _ReadAfter:
  """A fetch of a variable's value after `assignment`, a graph op, runs."""

  def __init__(self, assignment):
    self.assignment = assignment


class GraphCall:
  """Runs fetches of one captured graph (a `graph_capture.Graph`).

  Args:
    graph: The graph, finalized by the session before its first run.
  """

  def __init__(self, graph):
    self.graph = graph
    self._functions = {}  # (fetch keys, fed tensor names) -> (call, layout)
    self.functions_built = 0

  def owns(self, leaf):
    """Whether `leaf` is an element of this graph (or a name in it)."""
    if isinstance(leaf, (tf.Tensor, tf.Operation)):
      return getattr(leaf, 'graph', None) is self.graph
    return isinstance(leaf, str) and self._element(leaf, must=False) is not None

  def run(self, fetches, feed_dict=None):
    """Runs `fetches` with `feed_dict`; returns numpy results shaped as `fetches`."""
    flat = tf.nest.flatten(fetches)
    feeds = self._feeds(feed_dict or {})
    key = (tuple(_leaf_key(leaf) for leaf in flat),
           tuple(tensor.name for tensor, _ in feeds))
    entry = self._functions.get(key)
    if entry is None:
      entry = self._functions[key] = self._build(flat, [t for t, _ in feeds])
    call, layout = entry
    values = [value for _, value in feeds]
    before = [leaf.numpy() if kind == _VARIABLE else None
              for leaf, (kind, _) in zip(flat, layout)]
    outputs = call(values)
    results = []
    for leaf, (kind, index), value in zip(flat, layout, before):
      if kind == _OUTPUT:
        results.append(outputs[index].numpy())
      elif kind == _VARIABLE:
        results.append(value)
      elif kind == _READ_AFTER:
        results.append(leaf.numpy())
      elif kind == _VALUE:
        results.append(leaf.numpy() if isinstance(leaf, tf.Tensor) else np.asarray(leaf))
      else:
        results.append(None)
    return tf.nest.pack_sequence_as(fetches, results)

  def _build(self, flat, fed):
    tensors, operations, layout = [], [], []
    for leaf in flat:
      element = self._fetch_element(leaf)
      if isinstance(element, tf.Tensor):
        layout.append((_OUTPUT, len(tensors)))
        tensors.append(element)
      elif isinstance(element, tf.Operation):
        layout.append((_OPERATION, None))
        operations.append(element)
      elif isinstance(element, _ReadAfter):
        layout.append((_READ_AFTER, None))
        operations.append(element.assignment)
      elif element is None:
        layout.append((_NONE, None))
      elif fetch_plan.is_variable(element):
        layout.append((_VARIABLE, None))
      else:
        layout.append((_VALUE, None))
    pruned = self.graph.wrapped_function().prune(fed, tensors + operations)
    self.functions_built += 1
    return compiled_call.flat_caller(pruned), layout

  def _fetch_element(self, leaf):
    """The graph element, variable, value or None that `leaf` fetches."""
    # What graph code's `assign_add(v, 1)` returns: a read of the variable
    # after its assignment (an `_UnreadVariable`): the assignment runs, and
    # its value is read after the call, as TF1 fetched it.
    assignment = getattr(leaf, '_parent_op', None)
    if isinstance(assignment, tf.Operation) and assignment.graph is self.graph:
      return _ReadAfter(assignment)
    if leaf is None or fetch_plan.is_variable(leaf):
      return leaf
    if isinstance(leaf, (tf.Tensor, tf.Operation)):
      if not tf.is_symbolic_tensor(leaf) and isinstance(leaf, tf.Tensor):
        return leaf  # an eager value
      if leaf.graph is not self.graph:
        raise ValueError(
            f'Fetch {leaf!r} is an element of another graph than the one this '
            'session runs. Build it inside the same `with tfmon.Graph().as_default():` '
            'block as the session.')
      return leaf
    if isinstance(leaf, str):
      return self._element(leaf, must=True)
    if isinstance(leaf, (np.ndarray, np.generic, int, float, bool)):
      return np.asarray(leaf)
    raise TypeError(
        f'Fetch {leaf!r} of type {type(leaf).__name__} is not an element of the '
        'graph: fetch tensors, operations, their names, variables or nests of them.')

  def _element(self, name, must):
    try:
      return self.graph.as_graph_element(name)
    except (KeyError, ValueError) as e:
      if not must:
        return None
      names = [op.name for op in self.graph.get_operations()]
      nearest = difflib.get_close_matches(name.split(':')[0], names, n=3)
      raise ValueError(
          f'Fetch name {name!r} names nothing in the graph ({e}). Nearest '
          f'names: {nearest}. Name a tensor as `op_name:0` or an operation by '
          'its name.') from None

  def _feeds(self, feed_dict):
    """`[(fed tensor, value tensor)]` in a fixed order (by the tensor's name)."""
    feeds = []
    for key, value in feed_dict.items():
      tensor = key
      if isinstance(key, str):
        tensor = self._element(key, must=True)
      if not isinstance(tensor, tf.Tensor) or getattr(tensor, 'graph', None) is not self.graph:
        raise TypeError(
            f'feed_dict key {key!r} is not a tensor of the graph this session runs: '
            'key feeds by the placeholder (or its name, e.g. "x:0").')
      try:
        value = tf.convert_to_tensor(value, dtype=tensor.dtype)
      except (TypeError, ValueError) as e:
        raise TypeError(f'Cannot feed {value!r} to {tensor.name} of dtype '
                        f'{tensor.dtype.name}: {e}') from None
      if not tensor.shape.is_compatible_with(value.shape):
        raise ValueError(
            f'Cannot feed value of shape {tuple(value.shape)} for Tensor '
            f'{tensor.name!r}, which has shape {tensor.shape}')
      feeds.append((tensor, value))
    feeds.sort(key=lambda pair: pair[0].name)
    return feeds


def _leaf_key(leaf):
  if isinstance(leaf, (str, type(None))):
    return leaf
  return id(leaf)
