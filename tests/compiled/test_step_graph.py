"""StepGraph: a step function runs through autograph as tf.function would run it."""

import functools

import pytest
import tensorflow as tf

from tfmon.session import RawSession


@pytest.fixture
def sess():
  return RawSession()


def test_python_control_flow_on_tensors_in_a_step_is_converted(sess):
  sign = tf.Variable(0.)

  def step(n):
    total = tf.constant(0.)
    for i in tf.range(n):  # a tf.while_loop: n is a feed, unknown when traced
      total += tf.cast(i, tf.float32)
    if total > 5.:  # a tf.cond
      sign.assign(1.)
    else:
      sign.assign(-1.)
    return total

  assert sess.run(step, feed_dict={'n': 3}) == 3.0
  assert sign.numpy() == -1.0
  assert sess.run(step, feed_dict={'n': 4}) == 6.0  # the same trace, other branch
  assert sign.numpy() == 1.0


class _Counter:
  """Counts up to a limit, with Python control flow on a tensor."""

  def __init__(self):
    self.count = tf.Variable(0)

  def step(self, limit=2):
    if self.count < limit:
      self.count.assign_add(1)
    return self.count.read_value()

  def __call__(self):
    return self.step()


@pytest.mark.parametrize('kind', ['method', 'callable object', 'partial'])
def test_methods_callable_objects_and_partials_are_converted_too(sess, kind):
  counter = _Counter()
  step = {'method': counter.step, 'callable object': counter,
          'partial': functools.partial(counter.step, limit=tf.constant(2))}[kind]
  assert [int(sess.run(step)) for _ in range(4)] == [1, 2, 2, 2]


def test_a_step_marked_do_not_convert_runs_as_written(sess):

  @tf.autograph.experimental.do_not_convert
  def step():
    if tf.constant(True):  # unconverted: a symbolic tensor used as a bool
      return tf.constant(1)
    return tf.constant(0)

  with pytest.raises(TypeError, match='tf.Tensor. as a Python .bool.'):
    sess.run(step)
