"""Session: TF1's `tf.compat.v1.Session` for a captured graph.

TF1 programs make their sessions themselves: a plain `tf.compat.v1.Session()`
loop, `Supervisor.managed_session()`, TF's own `MonitoredTrainingSession`, and
the libraries built on them (tf-slim's training loops) all end in
`tf.compat.v1.Session(target, graph, config)`. TF's Session cannot run a
captured graph (its variables are eager, their handles placeholders of the
graph), so inside `with tfmon.Graph().as_default():`, or given such a graph,
that call makes this session instead: TF1's Session API over a RawSession,
whose runs are pruned functions of the graph (GraphCall). Elsewhere TF's
Session is untouched.

What it keeps of TF1's Session: `run(fetches, feed_dict, options,
run_metadata)` with TF1's fetch and feed forms, `with sess:` making it the
default session and its graph the default graph (`tensor.eval()`,
`op.run()`), `as_default()`, `graph`, `graph_def`, `sess_str`,
`list_devices()`, `make_callable()` (RawSession's), `close()`, and TF1's `Saver.save` and
`restore` through it, from any thread. `partial_run` is refused with the fix.
"""

import tensorflow as tf

from tfmon import tf_internals
from tfmon import tf_logging as logging
from tfmon import workers
from tfmon.compiled import graph_capture
from tfmon.session import session_creator
from tfmon.session.raw_session import RawSession


class Session(RawSession):
  """TF1's `tf.compat.v1.Session` on a captured graph (see the module doc).

  Args:
    target: TF1's execution engine to connect to; only '' (in-process) runs
      here.
    graph: The `tfmon.Graph` to run; by default, the default graph.
    config: A `tf.compat.v1.ConfigProto`, not applied (eager TensorFlow sets
      devices and threads for the whole process, with `tf.config`): a warning
      names what it sets beyond TF2's defaults, as tfmon's sessions do.

  Raises:
    ValueError: for a remote `target`, or a graph that is not a `tfmon.Graph`.
  """

  def __init__(self, target='', graph=None, config=None):
    if target:
      raise ValueError(
          f'tf.compat.v1.Session(target={target!r}) on a tfmon.Graph: a captured '
          'graph runs in this process only. Drop target; to train on several '
          'processes, use tf.distribute.MultiWorkerMirroredStrategy with a tfmon '
          'session, or TF1\'s own graph mode (tf.Graph).')
    session_creator.warn_unused('', config)  # tf.config sets the process's
    graph = graph if graph is not None else tf.compat.v1.get_default_graph()
    if not isinstance(graph, graph_capture.Graph):
      raise ValueError(
          f'tfmon.train.Session runs a tfmon.Graph; got {graph!r}. Build the graph '
          'inside `with tfmon.Graph().as_default():`.')
    with graph.as_default():
      super().__init__()
    if graph.strategy is not None and workers.count(graph.strategy) > 1:
      logging.warning(
          'TF\'s own sessions run this graph of a multi-worker strategy without '
          'the workers\' stop agreement: every worker must stop after the same step '
          '(a StopAtStepHook), else the others wait for it in a collective op. '
          'tfmon.train.MonitoredTrainingSession makes the workers agree on stops.')
    self._entered = []

  @property
  def graph_def(self):
    return self.graph.as_graph_def()

  @property
  def sess_str(self):
    return ''

  def list_devices(self):
    return [_SessionDevice(d.name, d.device_type)
            for d in tf.config.list_logical_devices()]

  def partial_run_setup(self, fetches, feeds=None):
    del fetches, feeds
    raise NotImplementedError(
        'partial_run is not supported on a tfmon.Graph: run the fetches in one '
        'session.run with all their feeds.')

  def partial_run(self, handle, fetches, feed_dict=None):
    del handle, fetches, feed_dict
    self.partial_run_setup(None)

  def as_default(self):
    """Makes this the default session (`tensor.eval()`, `op.run()`), as TF1's."""
    return tf_internals.default_session(self)

  def __enter__(self):
    graph_default, session_default = self.graph.as_default(), self.as_default()
    graph_default.__enter__()
    session_default.__enter__()
    self._entered.append((graph_default, session_default))
    return self

  def __exit__(self, exc_type, exc_value, traceback):
    graph_default, session_default = self._entered.pop()
    session_default.__exit__(exc_type, exc_value, traceback)
    graph_default.__exit__(exc_type, exc_value, traceback)
    self.close()


class _SessionDevice:
  """What TF1's `Session.list_devices()` listed for a device."""

  def __init__(self, name, device_type):
    self.name = name
    self.device_type = device_type
    self.memory_limit_bytes = 0
    self.incarnation = 0


def _tf_session_or_ours(cls, target='', graph=None, config=None):
  """`tf.compat.v1.Session.__new__`: a tfmon Session for a captured graph."""
  chosen = graph if graph is not None else tf.compat.v1.get_default_graph()
  if cls is tf.compat.v1.Session and isinstance(chosen, graph_capture.Graph):
    return Session(target, graph, config)
  return object.__new__(cls)


def let_tf_sessions_run_captured_graphs():
  """Makes `tf.compat.v1.Session(...)` on a tfmon.Graph make a tfmon Session
  (the module doc), and TF1's `Saver.save` with such a session save in the
  graph's mode from any thread (see _save_in_graph_mode); TF's sessions of
  other graphs are made as before. Called when a tfmon.Graph is first entered."""
  tf_session = tf.compat.v1.Session
  if tf_session.__dict__.get('__new__') is not _new:
    tf_session.__new__ = _new
  saver = tf.compat.v1.train.Saver
  if not getattr(saver.save, 'saves_in_graph_mode', False):
    saver.save = _save_in_graph_mode(saver.save)


_new = staticmethod(_tf_session_or_ours)


def _save_in_graph_mode(save):
  """TF1's `Saver.save`, in its session's graph when that is a captured graph.

  TF2 runs a thread eagerly: the save a Supervisor's timer thread makes (tf-slim's
  `learning.train`) took the Saver's eager path, and the Saver's later saves in
  the main thread wrote nothing. In the graph, it saves as in the main thread.
  """
  def save_in_its_graph(self, sess, *args, **kwargs):
    graph = getattr(sess, 'graph', None)
    if isinstance(graph, graph_capture.Graph) and tf.executing_eagerly():
      with graph.as_default():
        return save(self, sess, *args, **kwargs)
    return save(self, sess, *args, **kwargs)
  save_in_its_graph.saves_in_graph_mode = True
  save_in_its_graph.__doc__ = save.__doc__
  return save_in_its_graph
