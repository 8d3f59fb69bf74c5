"""NanTensorHook: a NaN loss fails or stops training at the step that produced it."""

import logging

import pytest
import tensorflow as tf

import tfmon
from tfmon.hooks.nan import NanLossDuringTrainingError, NanTensorHook


def _diverging_step():
  """A step whose loss, sqrt(3 - step), is NaN from global step 4 on."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    return {'loss': tf.sqrt(tf.cast(3 - global_step.read_value(), tf.float32))}

  return global_step, step


def _diverged_records(caplog):
  return [record.levelno for record in caplog.records
          if record.getMessage() == 'Model diverged with loss = NaN.']


def test_nan_loss_raises_at_the_step_that_produced_it(caplog):
  global_step, step = _diverging_step()
  losses = []
  with pytest.raises(NanLossDuringTrainingError) as raised:
    with tfmon.train.MonitoredSession(hooks=[NanTensorHook('loss')]) as sess:
      for _ in range(10):
        losses.append(sess.run(step)['loss'])
  assert str(raised.value) == 'NaN loss during training.'
  assert losses == pytest.approx([2 ** 0.5, 1.0, 0.0])
  assert global_step.numpy() == 4
  assert _diverged_records(caplog) == [logging.ERROR]


def test_the_error_is_tensorflows_own_class():
  assert NanLossDuringTrainingError is tf.compat.v1.train.NanLossDuringTrainingError
  assert issubclass(NanLossDuringTrainingError, RuntimeError)


def test_without_fail_on_nan_loss_it_warns_and_stops(caplog):
  global_step, step = _diverging_step()
  runs = 0
  with tfmon.train.MonitoredSession(
      hooks=[NanTensorHook('loss', fail_on_nan_loss=False)]) as sess:
    while not sess.should_stop() and runs < 10:
      sess.run(tfmon.train.op(step))
      runs += 1
  assert (runs, int(global_step.numpy())) == (4, 4)
  assert _diverged_records(caplog) == [logging.WARNING]  # v1's level when not failing


def test_loss_from_a_step_function_or_variable():
  global_step, step = _diverging_step()
  loss = tf.Variable(1.0)

  def step_and_record_loss():
    loss.assign(step()['loss'])

  hook = NanTensorHook(lambda: loss.read_value())  # runs after the step: post-step
  with pytest.raises(NanLossDuringTrainingError):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      for _ in range(10):
        sess.run(tfmon.train.op(step_and_record_loss))
  assert global_step.numpy() == 4
  # A variable fetch is read before the step, as TF1 did: NaN is seen one run later.
  global_step.assign(0)
  loss.assign(1.0)
  with pytest.raises(NanLossDuringTrainingError):
    with tfmon.train.MonitoredSession(hooks=[NanTensorHook(loss)]) as sess:
      for _ in range(10):
        sess.run(tfmon.train.op(step_and_record_loss))
  assert global_step.numpy() == 5


def test_finite_losses_never_stop():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    return {'loss': tf.constant(1e30) * tf.cast(global_step, tf.float32)}

  with tfmon.train.MonitoredSession(hooks=[NanTensorHook('loss')]) as sess:
    for _ in range(3):
      sess.run(step)
    assert not sess.should_stop()


def test_wrong_loss_tensor_types():
  with pytest.raises(TypeError, match=r"loss_tensor is the nest \['loss'\]; give one "
                     r"loss"):
    NanTensorHook(['loss'])
  with pytest.raises(TypeError, match='loss_tensor is None, which fetches no value'):
    NanTensorHook(None)
  with pytest.raises(TypeError, match='loss_tensor is op'):
    NanTensorHook(tfmon.train.op(lambda: None))
  with pytest.raises(TypeError, match='loss_tensor holds <object object'):
    NanTensorHook(object())


def test_a_loss_that_is_not_one_number_is_a_type_error():
  tfmon.train.get_or_create_global_step()
  with pytest.raises(TypeError, match=r"loss_tensor 'losses' gave array\(\[1\., 2\.\]"
                     r".*the loss must be one number"):
    with tfmon.train.MonitoredSession(hooks=[NanTensorHook('losses')]) as sess:
      sess.run(lambda: {'losses': tf.constant([1.0, 2.0])})
