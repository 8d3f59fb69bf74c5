"""Summary writers, one per directory, shared by every hook (v1's SummaryWriterCache).

A summary write that fails (a full disk, a directory gone read-only) must not
stop training: it is logged once and the writer is given up, while training
and checkpoints go on. TensorFlow writes events to disk only when a writer
flushes, and `writer.as_default()` flushes on exit, also inside a traced
function, where a failure would fail the training call itself. So the writers
made here never flush by themselves (their queue and interval are unbounded)
and never inside a function: they flush only from Python, through `flush`,
which catches the failure. Hooks flush after each run that records.
"""

import time

import tensorflow as tf
from tensorflow.core.util import event_pb2

from tfmon import paths
from tfmon import tf_internals
from tfmon import tf_logging as logging

_writers = {}
_failed = {}  # id(writer) -> the error that made us give it up
_logdirs = {}  # id(writer) -> its directory, for writers made here
_held_events = set()  # id(writer), its directory having held event files before it
_wrote_graph = set()  # id(writer), a session having written its graph through it
_NEVER = 2**31 - 1  # a writer's max_queue and flush_millis: it never flushes itself


def writer_for(logdir, arg_name='output_dir'):
  """Returns the `tf.summary` file writer for `logdir`, creating it once.

  Its events reach the disk when `flush` is called (eagerly), never inside a
  compiled call: see the module docstring.

  Raises:
    ValueError: naming `arg_name` and the path, if `logdir` is a file.
  """
  logdir = paths.check_directory(logdir, arg_name)
  writer = _writers.get(logdir)
  if writer is None:
    held_events = bool(tf.io.gfile.glob(f'{logdir}/events.out.tfevents.*'))
    writer = tf.summary.create_file_writer(logdir, max_queue=_NEVER,
                                           flush_millis=_NEVER)
    _flush_from_python_only(writer)
    _writers[logdir] = writer
    _logdirs[id(writer)] = logdir
    if held_events:
      _held_events.add(id(writer))
  return writer


def graph_written(writer, resumed):
  """Whether `writer`'s directory already holds the job's graph.

  It does when a session wrote it through `writer`, or, for a `resumed` job,
  when the directory held event files before this process made `writer`: the
  job's first session wrote the graph there. TensorBoard takes a second graph
  in one directory for a mistake ("Found more than one graph event per run").
  A job started anew writes its graph, which may be another model's.
  """
  return id(writer) in _wrote_graph or (resumed and id(writer) in _held_events)


def wrote_graph(writer):
  """Records that a session wrote its graph through `writer`."""
  _wrote_graph.add(id(writer))


def _flush_from_python_only(writer):
  """Makes `writer.flush()` a no-op while tracing and log-once when it fails."""
  tf_flush = writer.flush

  def flush():
    if not tf.executing_eagerly() or id(writer) in _failed:
      return  # no flush op in compiled calls (as_default's exit adds one)
    try:
      tf_flush()
    except tf.errors.OpError as e:
      _give_up(writer, e)

  writer.flush = flush  # as_default's exit calls writer.flush()


def _give_up(writer, error):
  if id(writer) in _failed:
    return
  _failed[id(writer)] = error
  where = _logdirs.get(id(writer), 'a summary writer')
  logging.error(
      'Writing summaries to %s failed, so no more are written there; training '
      'and checkpoints go on. Free space or fix the directory, then restart the '
      'job to write summaries again. The error: %s', where,
      str(error).strip().replace('\n', ' '))


def failed(writer):
  """Whether writing to `writer` failed and was given up."""
  return id(writer) in _failed


def flush(writer):
  """Flushes `writer`; a failure is logged once, and the writer given up."""
  if failed(writer):
    return
  try:
    writer.flush()
  except tf.errors.OpError as e:  # a writer not made by writer_for
    _give_up(writer, e)


def write_session_start(writer, step):
  """Writes v1's `SessionLog(status=START)` event at `step` into `writer`.

  TensorBoard then drops what earlier runs of the job wrote at `step` or later:
  a job killed (or stopped) after its last checkpoint wrote summaries that its
  resumed run writes again, and without this TensorBoard shows both. tf.summary
  has no public call for session logs; `import_event` writes a raw Event.
  """
  if failed(writer):
    return
  event = event_pb2.Event(step=step, wall_time=time.time(),
                          session_log=event_pb2.SessionLog(
                              status=event_pb2.SessionLog.START))
  try:
    with writer.as_default():
      tf_internals.import_event(event.SerializeToString())
  except tf.errors.OpError as e:
    _give_up(writer, e)


def write_simple_values(writer, values, step):
  """Writes `values` ({tag: number}) at `step` as one v1 `Summary` of `simple_value`s.

  As v1's StepCounterHook and Estimator's evaluation wrote them: readers of
  TF1-era event files (`EventAccumulator.Scalars`, `summary_iterator` loops
  reading `value.simple_value`, tensor2tensor's early stopping) see them, and
  TensorBoard shows them as it shows `tf.summary.scalar`. Written eagerly,
  whatever recording condition is in scope.
  """
  write_summary(writer, tf.compat.v1.Summary(value=[
      tf.compat.v1.Summary.Value(tag=tag, simple_value=float(value))
      for tag, value in values.items()]), step)


def write_graph_summaries(writer, serialized, step, graph=None, meta_graph_def=None):
  """Writes a captured TF1 graph's summaries (a serialized v1 `Summary`, or
  None) at `step`, and `graph` for TensorBoard's Graphs tab if given; then
  `meta_graph_def` (serialized) if given, as TF1's FileWriter followed the
  graph with its MetaGraphDef (`EventAccumulator.MetaGraph()` reads it), both
  at step 0 as TF1 wrote them."""
  if failed(writer):
    return
  try:
    with writer.as_default(), tf.summary.record_if(True):
      if graph is not None:
        tf.summary.graph(graph)
      if meta_graph_def is not None:
        tf_internals.import_event(event_pb2.Event(
            wall_time=time.time(), step=0, meta_graph_def=meta_graph_def).SerializeToString())
      if serialized:
        tf.summary.experimental.write_raw_pb(serialized, step=step)
  except tf.errors.OpError as e:
    _give_up(writer, e)


def write_summary(writer, summary, step):
  """Writes a v1 `Summary` proto at `step` (a failure gives the writer up)."""
  if failed(writer):
    return
  try:
    with writer.as_default(), tf.summary.record_if(True):
      tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=step)
  except tf.errors.OpError as e:
    _give_up(writer, e)


def summary_ops(summary_op):
  """`summary_op` as a list of callables (v1 took an op or a list of ops)."""
  if summary_op is None:
    return []
  ops = list(summary_op) if isinstance(summary_op, (list, tuple)) else [summary_op]
  for fn in ops:
    if not callable(fn):
      raise TypeError(
          f'summary_op {fn!r} is not callable. Pass a function (or a list of them) '
          'whose tf.summary calls are traced into the compiled call, e.g. '
          "summary_op=lambda: tf.summary.histogram('weights', model.kernel).")
  return ops
