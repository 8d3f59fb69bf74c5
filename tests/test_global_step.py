"""Global-step helpers share TensorFlow's own registry."""

import pytest
import tensorflow as tf

import tfmon


def test_tfmon_and_tensorflow_return_the_same_variable():
  assert tfmon.train.get_global_step() is None
  step = tfmon.train.get_or_create_global_step()
  assert tf.compat.v1.train.get_or_create_global_step() is step
  assert tf.compat.v1.train.get_global_step() is step
  assert step.dtype == tf.int64


def test_create_global_step_twice_raises():
  tfmon.train.create_global_step()
  with pytest.raises(ValueError, match='"global_step" already exists'):
    tfmon.train.create_global_step()


def test_global_step_value():
  step = tfmon.train.get_or_create_global_step()
  step.assign(7)
  assert tfmon.train.global_step(None, step) == 7
  with tfmon.train.MonitoredSession() as sess:
    assert tfmon.train.global_step(sess, step) == 7
