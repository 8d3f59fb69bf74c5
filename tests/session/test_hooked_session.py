"""How hooks' SessionRunArgs merge into the caller's run."""

import os

import pytest
import tensorflow as tf

import tfmon


class FetchHook(tfmon.train.SessionRunHook):
  """Asks for `fetches` (and `feed_dict`) every run and keeps what came back."""

  def __init__(self, fetches=None, feed_dict=None, options=None):
    self.request = tfmon.train.SessionRunArgs(fetches, feed_dict, options)
    self.results = []

  def before_run(self, run_context):
    return self.request

  def after_run(self, run_context, run_values):
    self.results.append(run_values.results)
    self.run_values = run_values


def _model():
  weight = tf.Variable(1.0)

  def train_step(lr=0.5):
    weight.assign_sub(lr)
    return {'weight': weight.read_value(), 'loss': weight * 2.0}

  return weight, train_step


def test_hook_fetches_see_the_caller_step_in_the_same_call():
  weight, train_step = _model()
  names = FetchHook(['weight', 'loss'])
  variable = FetchHook(weight)
  callable_hook = FetchHook(lambda: weight.read_value() * 10.0)
  hooks = [names, variable, callable_hook]
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    result = sess.run(tfmon.train.op(train_step))
  assert result is None
  assert names.results == [[0.5, 1.0]]
  assert variable.results == [1.0]  # a variable is read before the step
  assert callable_hook.results == [5.0]  # a hook's callable runs after it


def test_hook_feeds_reach_the_caller_step():
  weight, train_step = _model()
  with tfmon.train.MonitoredSession(hooks=[FetchHook(feed_dict={'lr': 0.25})]) as sess:
    assert sess.run(train_step)['weight'] == 0.75
  assert weight.numpy() == 0.75


def test_same_feed_from_two_hooks_is_v1_error():
  _, train_step = _model()
  hooks = [FetchHook(feed_dict={'lr': 0.1}), FetchHook(feed_dict={'lr': 0.2})]
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    with pytest.raises(RuntimeError, match=r"^Same tensor is fed by two hooks\. "
                       r"Conflict\(s\): \['lr'\]$"):
      sess.run(train_step)


def test_same_feed_from_hook_and_user_is_v1_error():
  _, train_step = _model()
  with tfmon.train.MonitoredSession(hooks=[FetchHook(feed_dict={'lr': 0.1})]) as sess:
    with pytest.raises(RuntimeError, match=r"^Same tensor is fed by a SessionRunHook "
                       r"and user\. Conflict\(s\): \['lr'\]$"):
      sess.run(train_step, feed_dict={'lr': 0.3})


def test_hook_options_merge_by_v1_rules(tmp_path):
  options = tf.compat.v1.RunOptions(
      trace_level=tf.compat.v1.RunOptions.FULL_TRACE, timeout_in_ms=50)
  hook = FetchHook(options=options)
  with tfmon.train.MonitoredSession(hooks=[hook], profile_dir=str(tmp_path)) as sess:
    sess.run(lambda: tf.constant(1), options=tf.compat.v1.RunOptions(timeout_in_ms=100))
  assert hook.run_values.options.trace_level == tf.compat.v1.RunOptions.FULL_TRACE
  assert hook.run_values.options.timeout_in_ms == 100
  assert isinstance(hook.run_values.run_metadata, tf.compat.v1.RunMetadata)
  assert len(os.listdir(tmp_path / 'plugins' / 'profile')) == 1  # the traced run


def test_a_hook_written_for_tf_compat_v1_runs_unchanged():
  weight, train_step = _model()

  class V1LoggingHook(tf.compat.v1.train.SessionRunHook):
    """A hook as TF1 code wrote it, importing nothing from tfmon."""

    def begin(self):
      self.logged = []

    def before_run(self, run_context):
      return tf.compat.v1.train.SessionRunArgs({'loss': 'loss', 'w': weight})

    def after_run(self, run_context, run_values):
      self.logged.append(run_values.results)

  hook = V1LoggingHook()
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for _ in range(2):
      sess.run(tfmon.train.op(train_step))
  assert hook.logged == [{'loss': 1.0, 'w': 1.0}, {'loss': 0.0, 'w': 0.5}]


def test_hook_api_types_are_tensorflows():
  assert tfmon.train.SessionRunHook is tf.compat.v1.train.SessionRunHook
  assert tfmon.SessionRunArgs is tf.compat.v1.train.SessionRunArgs
  assert isinstance(tfmon.train.StopAtStepHook(num_steps=1),
                    tf.compat.v1.train.SessionRunHook)
