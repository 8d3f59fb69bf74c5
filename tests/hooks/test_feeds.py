"""FeedFnHook: feeds step-function parameters by name on every run."""

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon.hooks.feeds import FeedFnHook


def _batches():
  for i in range(100):
    yield {'x': np.full([2], i, np.float32), 'scale': float(i + 1)}


@pytest.mark.parametrize('steps_per_loop', [1, 10])
def test_feeds_a_new_value_every_run_without_retracing(steps_per_loop):
  traces = []
  global_step = tfmon.train.get_or_create_global_step()

  def step(x, scale):
    traces.append(1)
    global_step.assign_add(1)
    return {'y': tf.reduce_sum(x) * scale}

  batches = _batches()
  hook = FeedFnHook(lambda: next(batches))
  # With step fusion, runs stay one step each: every step needs its feeds.
  with tfmon.train.MonitoredSession(hooks=[hook], steps_per_loop=steps_per_loop) as sess:
    results = [float(sess.run(step)['y']) for _ in range(4)]
  assert results == [0.0, 2 * 2.0, 4 * 3.0, 6 * 4.0]  # sum(x) * scale for i = 0..3
  assert global_step.numpy() == 4
  assert len(traces) == 1


def test_feed_fn_is_public_as_in_v1():
  feed_fn = lambda: {'x': 1.0}  # pylint: disable=g-long-lambda
  assert FeedFnHook(feed_fn).feed_fn is feed_fn


def test_a_key_fed_by_the_hook_and_the_caller_is_v1s_conflict():
  hook = FeedFnHook(lambda: {'x': 1.0})
  with pytest.raises(RuntimeError, match=r"^Same tensor is fed by a SessionRunHook "
                     r"and user\. Conflict\(s\): \['x'\]$"):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      sess.run(lambda x: x, feed_dict={'x': 2.0})


def test_two_hooks_feeding_one_key_is_v1s_conflict():
  hooks = [FeedFnHook(lambda: {'x': 1.0}), FeedFnHook(lambda: {'x': 2.0})]
  with pytest.raises(RuntimeError, match=r"^Same tensor is fed by two hooks\. "
                     r"Conflict\(s\): \['x'\]$"):
    with tfmon.train.MonitoredSession(hooks=hooks) as sess:
      sess.run(lambda x: x)


def test_hook_and_caller_feed_different_parameters():
  hook = FeedFnHook(lambda: {'scale': 3.0})
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    assert sess.run(lambda x, scale: x * scale, feed_dict={'x': 2.0}) == 6.0


def test_feed_fn_errors():
  with pytest.raises(TypeError, match="feed_fn must be a function returning a "
                     "feed_dict; got {'x': 1.0}"):
    FeedFnHook({'x': 1.0})
  hook = FeedFnHook(lambda: [('x', 1.0)])
  with pytest.raises(TypeError, match=r"feed_fn returned \[\('x', 1\.0\)\] of type "
                     r"list; it must return a dict"):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      sess.run(lambda x: x)
  hook = FeedFnHook(lambda: {'images': 1.0})
  with pytest.raises(ValueError, match="feed_dict key 'images' matches no parameter"):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      sess.run(lambda x=0.0: x)
