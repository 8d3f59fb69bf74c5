"""StopAtStepHook, including the fix for re-running a finished job."""

import logging

import pytest
import tensorflow as tf

import tfmon


def _train(hook, runs_allowed=100):
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)

  runs = 0
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    while not sess.should_stop() and runs < runs_allowed:
      sess.run(tfmon.train.op(step))
      runs += 1
  return runs, int(global_step.numpy())


def test_last_step_stops_after_that_step():
  assert _train(tfmon.train.StopAtStepHook(last_step=7)) == (7, 7)


def test_num_steps_counts_from_session_creation():
  tfmon.train.get_or_create_global_step().assign(10)
  assert _train(tfmon.train.StopAtStepHook(num_steps=4)) == (4, 14)


def test_step_that_increments_by_two_stops_at_or_past_last_step():
  global_step = tfmon.train.get_or_create_global_step()
  with tfmon.train.MonitoredSession(
      hooks=[tfmon.train.StopAtStepHook(last_step=5)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(lambda: global_step.assign_add(2)))
  assert global_step.numpy() == 6


def test_finished_job_stops_at_creation_and_says_why(caplog):
  tfmon.train.get_or_create_global_step().assign(20)
  caplog.set_level(logging.INFO)
  assert _train(tfmon.train.StopAtStepHook(last_step=20)) == (0, 20)
  assert 'Global step 20 has already reached last_step 20' in caplog.text


def test_argument_errors_are_v1s():
  with pytest.raises(ValueError, match='^One of num_steps or last_step must be '
                     'specified.$'):
    tfmon.train.StopAtStepHook()
  with pytest.raises(ValueError, match='^Only one of num_steps or last_step can be '
                     'specified.$'):
    tfmon.train.StopAtStepHook(num_steps=1, last_step=2)


def test_missing_global_step_says_how_to_create_it():
  with pytest.raises(RuntimeError, match=r'Global step should be created to use '
                     r'StopAtStepHook\. Create it .*get_or_create_global_step\(\).*'
                     r'assign_add\(1\)'):
    tfmon.train.MonitoredSession(hooks=[tfmon.train.StopAtStepHook(last_step=1)])


def test_tf_compat_v1_global_step_is_the_one_used():
  global_step = tf.compat.v1.train.get_or_create_global_step()
  assert _train(tfmon.train.StopAtStepHook(last_step=3)) == (3, 3)
  assert global_step.numpy() == 3


@pytest.mark.parametrize('kwargs, error, message', [
    ({'last_step': 'x'}, TypeError, r"last_step='x' of type str is not a step count"),
    ({'num_steps': 2.5}, TypeError, r'num_steps=2.5 of type float'),
    ({'num_steps': -1}, ValueError, r'num_steps=-1 is negative'),
    ({'last_step': -5}, ValueError, r'last_step=-5 is negative'),
])
def test_a_bad_step_count_names_the_value(kwargs, error, message):
  with pytest.raises(error, match=message):
    tfmon.train.StopAtStepHook(**kwargs)
