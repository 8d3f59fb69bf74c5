"""FinalOpsHook: values fetched when the session ends."""

import logging

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon.hooks.final_ops import FinalOpsHook


def test_final_ops_run_on_the_final_state_at_end():
  total = tf.Variable(0.0)
  count = tf.Variable(0.0)

  def update(x):
    total.assign_add(x)
    count.assign_add(1.0)

  def mean():
    return total / count

  hook = FinalOpsHook({'mean': mean, 'count': count, 'nested': [total, None]})
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for x in (1.0, 2.0, 6.0):
      sess.run(tfmon.train.op(update), feed_dict={'x': x})
    assert hook.final_ops_values is None  # nothing runs before end
  assert hook.final_ops_values == {'mean': 3.0, 'count': 3.0, 'nested': [9.0, None]}
  assert isinstance(hook.final_ops_values['mean'], np.float32)


def test_a_single_fetch_and_a_feed_dict():
  weights = tf.Variable([1.0, 2.0])
  hook = FinalOpsHook(lambda scale: weights * scale,
                      final_ops_feed_dict={'scale': 3.0})
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    sess.run(tfmon.train.op(lambda: weights.assign_add([1.0, 1.0])))
  np.testing.assert_array_equal(hook.final_ops_values, [6.0, 9.0])


def test_names_resolve_against_step_functions_of_final_ops():
  accuracy = tf.Variable(0.75)
  hook = FinalOpsHook([lambda: {'accuracy': accuracy * 1}, 'accuracy'])
  with tfmon.train.MonitoredSession(hooks=[hook]):
    pass
  assert hook.final_ops_values == [{'accuracy': 0.75}, 0.75]


def test_none_runs_nothing():
  hook = FinalOpsHook(None)
  with tfmon.train.MonitoredSession(hooks=[hook]):
    pass
  assert hook.final_ops_values is None


def test_no_values_when_the_session_ends_with_an_exception():
  calls = tf.Variable(0)
  hook = FinalOpsHook(lambda: calls.assign_add(1))
  with pytest.raises(ZeroDivisionError):
    with tfmon.train.MonitoredSession(hooks=[hook]):
      raise ZeroDivisionError()
  assert hook.final_ops_values is None
  assert calls.numpy() == 0  # as v1, end() is not called while an error propagates


def test_out_of_range_is_explained_and_reraised(caplog):
  iterator = iter(tf.data.Dataset.range(2))
  hook = FinalOpsHook(lambda: next(iterator))
  sess = tfmon.train.MonitoredSession(hooks=[hook])
  sess.run(tfmon.train.op(lambda: next(iterator)))
  sess.run(tfmon.train.op(lambda: next(iterator)))
  with pytest.raises(tf.errors.OutOfRangeError):
    sess.close()
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert any(w.startswith('An OutOfRangeError or StopIteration exception is raised by '
                          'the code in FinalOpsHook.') and
             w.endswith('Please fix that.')
             for w in warnings)


def test_stop_iteration_is_explained_and_reraised(caplog):
  hook = FinalOpsHook(lambda: next(iter(())))  # raises StopIteration while tracing
  sess = tfmon.train.MonitoredSession(hooks=[hook])
  with pytest.raises(StopIteration):
    sess.close()
  assert 'exception is raised by the code in FinalOpsHook' in caplog.text


def test_wrong_types_fail_at_construction():
  with pytest.raises(TypeError, match=r"final_ops holds <object object .* which "
                     r"run\(\) cannot fetch"):
    FinalOpsHook({'a': [object()]})
  with pytest.raises(TypeError, match=r"final_ops_feed_dict must be a dict; got \[1\]"):
    FinalOpsHook(lambda: 1, final_ops_feed_dict=[1])
  with pytest.raises(TypeError, match="final_ops_feed_dict key 1 is a int"):
    FinalOpsHook(lambda: 1, final_ops_feed_dict={1: 2.0})
