"""Reading event files back with TensorBoard's own EventAccumulator."""

import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_accumulator


def events(logdir):
  accumulator = event_accumulator.EventAccumulator(
      str(logdir), size_guidance={event_accumulator.TENSORS: 0})
  accumulator.Reload()
  return accumulator


def steps(accumulator, tag):
  return [event.step for event in accumulator.Tensors(tag)]


def values(accumulator, tag):
  return [float(tf.make_ndarray(event.tensor_proto)) for event in accumulator.Tensors(tag)]


def served(logdir, tag):
  """`(steps, values)` of scalar `tag` as TensorBoard's server reads them (its
  plugin accumulator, which also drops what a restarted run superseded)."""
  accumulator = plugin_event_accumulator.EventAccumulator(str(logdir))
  accumulator.Reload()
  events = accumulator.Tensors(tag)
  return ([event.step for event in events],
          [float(tf.make_ndarray(event.tensor_proto)) for event in events])
