"""Summary writers, one per directory, shared by every hook (v1's SummaryWriterCache)."""

import os

import tensorflow as tf

_writers = {}


def writer_for(logdir):
  """Returns the `tf.summary` file writer for `logdir`, creating it once."""
  logdir = os.fspath(logdir)
  writer = _writers.get(logdir)
  if writer is None:
    writer = _writers[logdir] = tf.summary.create_file_writer(logdir)
  return writer


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
