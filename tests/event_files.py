"""Reading event files back with TensorBoard's own EventAccumulator, and with
TF1's `summary_iterator` as TF1-era tools read them."""

import glob
import os

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


def scalars(accumulator, tag):
  """`(steps, values)` of v1 `simple_value` scalar `tag` (EventAccumulator.Scalars)."""
  events = accumulator.Scalars(tag)
  return [event.step for event in events], [event.value for event in events]


def simple_values(logdir, tag):
  """`{step: value}` of `tag` as a TF1-era reader finds it: every event file
  of `logdir`, `tf.compat.v1.train.summary_iterator`, `value.simple_value`."""
  found = {}
  for path in sorted(glob.glob(os.path.join(str(logdir), 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag and value.HasField('simple_value'):
          found[event.step] = value.simple_value
  return found
