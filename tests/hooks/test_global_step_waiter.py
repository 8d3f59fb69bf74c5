"""GlobalStepWaiterHook: the first run waits for another worker's global step."""

import logging
import threading
import time

import pytest

import tfmon
from tfmon.hooks.global_step_waiter import GlobalStepWaiterHook


def _set_later(variable, value, delay_secs):
  """Sets `variable` to `value` from another thread, as another worker would."""
  thread = threading.Timer(delay_secs, lambda: variable.assign(value))
  thread.start()
  return thread


def _messages(caplog):
  """The hook's own lines (sessions log their creation lines on the same logger)."""
  return [r.getMessage() for r in caplog.records
          if r.name == 'tensorflow' and r.filename == 'global_step_waiter.py']


def test_first_run_waits_until_the_global_step_is_reached(caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  steps_seen = []

  def step():
    global_step.assign_add(1)
    return global_step.read_value()

  with tfmon.train.MonitoredSession(hooks=[GlobalStepWaiterHook(5)]) as sess:
    thread = _set_later(global_step, 5, delay_secs=0.2)
    start = time.monotonic()
    steps_seen.append(int(sess.run(step)))
    waited = time.monotonic() - start
    steps_seen.append(int(sess.run(step)))  # started: no more waiting
    thread.join()
  assert waited >= 0.2
  assert steps_seen == [6, 7]  # the first step ran only after step 5 was reached
  assert _messages(caplog) == ['Waiting for global step 5 before starting training.']


def test_progress_is_logged_when_the_step_moved_by_more_than_1000(caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  global_step.assign(1001)
  with tfmon.train.MonitoredSession(hooks=[GlobalStepWaiterHook(3000)]) as sess:
    thread = _set_later(global_step, 3000, delay_secs=0.1)
    sess.run(lambda: None)
    thread.join()
  assert _messages(caplog) == [
      'Waiting for global step 3000 before starting training.',
      'Waiting for global step 3000 before starting training. Current step is 1001.',
  ]


@pytest.mark.parametrize('wait_until_step', [0, -3])
def test_non_positive_step_does_not_wait(wait_until_step, caplog):
  caplog.set_level(logging.INFO)
  tfmon.train.get_or_create_global_step()
  with tfmon.train.MonitoredSession(
      hooks=[GlobalStepWaiterHook(wait_until_step)]) as sess:
    start = time.monotonic()
    sess.run(lambda: None)
    assert time.monotonic() - start < 0.4  # less than one poll
  assert 'Waiting for global step' not in caplog.text


def test_reached_step_does_not_wait():
  tfmon.train.get_or_create_global_step().assign(7)
  with tfmon.train.MonitoredSession(hooks=[GlobalStepWaiterHook(7)]) as sess:
    start = time.monotonic()
    sess.run(lambda: None)
    assert time.monotonic() - start < 0.4


def test_errors():
  with pytest.raises(TypeError, match="wait_until_step must be an int; got '5'"):
    GlobalStepWaiterHook('5')
  with pytest.raises(RuntimeError, match=r'^Global step should be created to use '
                     r'GlobalStepWaiterHook\. Create it'):
    tfmon.train.MonitoredSession(hooks=[GlobalStepWaiterHook(1)])


def test_a_fetched_global_step_is_its_value_when_the_run_starts_after_waiting():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)

  with tfmon.train.MonitoredSession(hooks=[GlobalStepWaiterHook(2)]) as sess:
    thread = _set_later(global_step, 2, delay_secs=0.2)
    _, fetched = sess.run([step, global_step])
    thread.join()
    assert fetched == 2  # read at the run, as TF1 did: not the 0 counted before
    _, fetched = sess.run([step, global_step])
    assert fetched == 3
  assert int(global_step.numpy()) == 4
