"""A session on a captured TF1 graph (SPEC section 8): hooks as TF1 ran them.

A session made inside `with tfmon.Graph().as_default():` runs eagerly below its
hooks (`graph_capture.running`), while each hook that is not one of tfmon's
own runs in graph mode with the captured graph as the default graph, as TF1
ran it: ops it builds in `begin()` are graph ops that run when fetched, and
`tf.compat.v1.get_default_graph()` is the captured graph in every callback.
After the hooks' `begin()`, the session creator's `Scaffold.finalize()`
finalizes the graph, as TF1's did.
"""

import logging
import os

import tensorflow as tf


def is_tfmon_hook(hook):
  """Whether `hook` is (or subclasses) one of tfmon's own hook classes, which
  run eagerly."""
  return any(cls.__module__.startswith('tfmon.') for cls in type(hook).__mro__)


class GraphModeHook(tf.compat.v1.train.SessionRunHook):
  """Runs a TF1 hook's callbacks in graph mode, with the captured graph as the
  default graph."""

  def __init__(self, hook, graph):
    self.hook = hook
    self._graph = graph

  def begin(self):
    with self._graph.as_default():
      self.hook.begin()
      if (isinstance(self.hook, tf.compat.v1.train.CheckpointSaverHook) and
          not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)):
        # TF1's Scaffold.finalize() made the default Saver, which TF's
        # CheckpointSaverHook looks up when given neither saver nor scaffold.
        tf.compat.v1.add_to_collection(
            tf.compat.v1.GraphKeys.SAVERS,
            tf.compat.v1.train.Saver(sharded=True, allow_empty=True))

  def after_create_session(self, session, coord):
    with self._graph.as_default():
      self.hook.after_create_session(session, coord)

  def before_run(self, run_context):
    with self._graph.graph_mode():
      return self.hook.before_run(run_context)

  def after_run(self, run_context, run_values):
    with self._graph.graph_mode():
      self.hook.after_run(run_context, run_values)

  def end(self, session):
    with self._graph.as_default():
      self.hook.end(session)

  def __getattr__(self, name):  # what a caller reads of the hook itself
    return getattr(self.hook, name)

  def __repr__(self):
    return repr(self.hook)


def hooks_for(hooks, graph):
  """`hooks`, each TF1 hook wrapped to run in graph mode on `graph`."""
  return [hook if is_tfmon_hook(hook) else GraphModeHook(hook, graph)
          for hook in hooks]


def tensors_held_by(hooks):
  """The graph tensors `hooks` hold in their attributes (alone, or in lists,
  tuples and dicts): what they are likely to fetch when due."""
  tensors = []
  for hook in hooks:
    hook = hook.hook if isinstance(hook, GraphModeHook) else hook
    for value in vars(hook).values():
      if isinstance(value, dict):
        value = list(value.values())
      for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, tf.Tensor) and tf.is_symbolic_tensor(item):
          tensors.append(item)
  return tensors


def strategy_of(graph, strategy):
  """The strategy a session on `graph` runs under: the one the graph was built
  under (`capture_graph(build, strategy=...)`), or None; `strategy` (the
  session's argument, or the one in scope) must be that one or None.

  Raises:
    ValueError: with the fix, for a strategy the graph was not built under.
  """
  if graph.strategy is None:
    if strategy is not None:
      raise ValueError(
          f'strategy={strategy!r} with a captured TF1 graph built without it: the '
          'graph holds one copy of the model. Build it in a function, once per '
          'replica: `graph, outputs = tfmon.train.capture_graph(build, '
          'strategy=strategy)` (docs/distribution.md), and create the session '
          'inside `with graph.as_default():`.')
    return None
  if strategy is not None and strategy is not graph.strategy:
    raise ValueError(
        f'strategy={strategy!r} differs from {graph.strategy!r}, which the captured '
        'graph was built under (capture_graph): pass that one, or none.')
  return graph.strategy


def wants_xla(config):
  """Whether a TF1 `ConfigProto` turns on XLA auto-clustering
  (`graph_options.optimizer_options.global_jit_level` ON_1 or ON_2)."""
  levels = tf.compat.v1.OptimizerOptions
  return isinstance(config, tf.compat.v1.ConfigProto) and (
      config.graph_options.optimizer_options.global_jit_level in (levels.ON_1, levels.ON_2))


def autoclustering():
  """Turns on XLA auto-clustering, TF1's `global_jit_level=ON_1`: XLA compiles
  the clusters of ops it can in each function TensorFlow instantiates from
  now on (TF2's switch is the process's). Returns a function that restores
  the previous setting.

  TF1's clustering on CPU needs `TF_XLA_FLAGS=--tf_xla_cpu_global_jit` set
  before TensorFlow starts (read once, at device registration): without it,
  and with no GPU, this says so, as nothing will compile.
  """
  previous = tf.config.optimizer.get_jit()
  tf.config.optimizer.set_jit('autoclustering')
  if (not tf.config.list_logical_devices('GPU') and
      'tf_xla_cpu_global_jit' not in os.environ.get('TF_XLA_FLAGS', '')):
    logging.getLogger('tensorflow').warning(
        'XLA auto-clustering (jit_compile=True, or a ConfigProto\'s '
        'global_jit_level, on a captured graph) compiles nothing on CPU unless '
        'TF_XLA_FLAGS=--tf_xla_cpu_global_jit is set before TensorFlow starts, '
        'as in TF1. (On a 2-core CPU it made TF\'s CIFAR-10 tutorial step 2x '
        'slower, TF1\'s own XLA too: docs/distribution.md, XLA.)')
  return lambda: tf.config.optimizer.set_jit(previous or False)
