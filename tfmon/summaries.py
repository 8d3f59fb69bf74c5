"""Summary writers, one per directory, shared by every hook (v1's SummaryWriterCache)."""

import os

import tensorflow as tf

from tfmon.compiled import compiled_call

_writers = {}


def writer_for(logdir):
  """Returns the `tf.summary` file writer for `logdir`, creating it once."""
  logdir = os.fspath(logdir)
  writer = _writers.get(logdir)
  if writer is None:
    writer = _writers[logdir] = tf.summary.create_file_writer(logdir)
  return writer


def scalar_writer(writer, tag):
  """Returns `write(value, step)`, writing the scalar `tag` into `writer`.

  For summaries written from Python between runs (StepCounterHook's
  `global_step/sec`): an eager `tf.summary.scalar` runs its dozen ops one at a
  time, 0.26-0.40 ms here; traced once and called through its flat entry point,
  they cost 0.12-0.14 ms (measured in BUILD_NOTES.md).

  Args:
    writer: A `tf.summary.SummaryWriter`.
    tag: The scalar's tag.
  """
  @tf.function(autograph=False)
  def write(value, step):
    with writer.as_default(step=step):
      tf.summary.scalar(tag, value)

  traced = []  # traced at the first write: a hook that never triggers never traces

  def call(value, step):
    if not traced:
      traced.append(compiled_call.flat_caller(write.get_concrete_function(
          tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int64))))
    traced[0]([tf.constant(value, tf.float32), tf.constant(step, tf.int64)])

  return call


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
