"""run_step_fn and StepContext."""

import pytest
import tensorflow as tf

import tfmon


class CountingHook(tfmon.train.SessionRunHook):

  def begin(self):
    self.runs = 0

  def after_run(self, run_context, run_values):
    self.runs += 1


def test_step_context_runs_with_and_without_hooks_and_stops():
  hook = CountingHook()
  value = tf.Variable(0.0)

  def step():
    value.assign_add(1.0)
    return value.read_value()

  def step_fn(step_context):
    raw = step_context.session.run(value)
    if raw >= 2.0:
      step_context.request_stop()
    return step_context.run_with_hooks(step)

  results = []
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    while not sess.should_stop():
      results.append(sess.run_step_fn(step_fn))
  assert results == [1.0, 2.0]
  assert hook.runs == 2  # session.run inside step_fn does not call hooks


def test_step_fn_method_is_accepted():
  class Trainer:

    def step_fn(self, step_context):
      return step_context.session.run(lambda: tf.constant(3))

  with tfmon.train.MonitoredSession() as sess:
    assert sess.run_step_fn(Trainer().step_fn) == 3


def test_step_fn_with_wrong_arguments_is_v1_error():
  with tfmon.train.MonitoredSession() as sess:
    with pytest.raises(ValueError, match=r"`step_fn` may either have one "
                       r"`step_context` argument.*Got \('ctx',\) instead"):
      sess.run_step_fn(lambda ctx: None)


def test_step_context_is_exposed_on_monitored_session():
  assert tfmon.train.MonitoredSession.StepContext.__name__ == 'StepContext'
