"""Summary writers, one per directory, shared by every hook (v1's SummaryWriterCache)."""

import os
import time

import tensorflow as tf
from tensorflow.core.util import event_pb2
from tensorflow.python.ops import summary_ops_v2

from tfmon import paths

_writers = {}


def writer_for(logdir, arg_name='output_dir'):
  """Returns the `tf.summary` file writer for `logdir`, creating it once.

  Raises:
    ValueError: naming `arg_name` and the path, if `logdir` is a file.
  """
  logdir = os.fspath(logdir)
  writer = _writers.get(logdir)
  if writer is None:
    paths.check_directory(logdir, arg_name)
    writer = _writers[logdir] = tf.summary.create_file_writer(logdir)
  return writer


def write_session_start(writer, step):
  """Writes v1's `SessionLog(status=START)` event at `step` into `writer`.

  TensorBoard then drops what earlier runs of the job wrote at `step` or later:
  a job killed (or stopped) after its last checkpoint wrote summaries that its
  resumed run writes again, and without this TensorBoard shows both. tf.summary
  has no public call for session logs; `import_event` writes a raw Event.
  """
  event = event_pb2.Event(step=step, wall_time=time.time(),
                          session_log=event_pb2.SessionLog(
                              status=event_pb2.SessionLog.START))
  with writer.as_default():
    summary_ops_v2.import_event(tf.constant(event.SerializeToString()))


def write_simple_values(writer, values, step):
  """Writes `values` ({tag: number}) at `step` as one v1 `Summary` of `simple_value`s.

  As v1's StepCounterHook and Estimator's evaluation wrote them: readers of
  TF1-era event files (`EventAccumulator.Scalars`, `summary_iterator` loops
  reading `value.simple_value`, tensor2tensor's early stopping) see them, and
  TensorBoard shows them as it shows `tf.summary.scalar`. Written eagerly,
  whatever recording condition is in scope.
  """
  summary = tf.compat.v1.Summary(value=[
      tf.compat.v1.Summary.Value(tag=tag, simple_value=float(value))
      for tag, value in values.items()])
  with writer.as_default(), tf.summary.record_if(True):
    tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=step)


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
