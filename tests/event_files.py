"""Reading event files back with TensorBoard's own EventAccumulator."""

import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator


def events(logdir):
  accumulator = event_accumulator.EventAccumulator(
      str(logdir), size_guidance={event_accumulator.TENSORS: 0})
  accumulator.Reload()
  return accumulator


def steps(accumulator, tag):
  return [event.step for event in accumulator.Tensors(tag)]


def values(accumulator, tag):
  return [float(tf.make_ndarray(event.tensor_proto)) for event in accumulator.Tensors(tag)]
