"""StepGraph: a step function runs through autograph as tf.function would run it."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from tfmon.compiled import op
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


def test_a_v1_optimizer_minimizes_without_var_list_the_variables_the_step_used(sess):
  # TF1's default var_list: the graph's trainable variables. A step's are
  # those it has used: here one made before the session, one made by
  # get_variable in the trace, and none it did not use or cannot train.
  outside = tf.Variable(3.0, name='outside')
  unused = tf.Variable(5.0, name='unused')
  frozen = tf.Variable(2.0, name='frozen', trainable=False)
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.25)
  listed, inside = [], []

  def step():
    inside.append(tf.compat.v1.get_variable('no_var_list/inside', initializer=1.0))
    loss = outside * outside + inside[0] * inside[0] * frozen
    listed.append(sorted(v.name for v in tf.compat.v1.trainable_variables()))
    return {'loss': loss, 'train': optimizer.minimize(loss)}

  assert sess.run(step)['loss'] == 11.0  # 9 + 1 * 2
  assert listed == [['no_var_list/inside:0', 'outside:0']]
  # d(loss)/d(outside) = 6, d(loss)/d(inside) = 4 * inside = 4.
  assert outside.numpy() == 1.5
  assert inside[0].numpy() == 0.0
  assert unused.numpy() == 5.0 and frozen.numpy() == 2.0
  # The collection outside the step is left as it was.
  assert tf.compat.v1.trainable_variables() == []


def test_variables_first_used_in_a_loop_are_minimized_too(sess):
  weights = tf.Variable([1.0, 2.0], name='looped')
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.5)

  def step():
    loss = tf.constant(0.0)
    for i in tf.range(2):  # a tf.while_loop: weights is read in its body only
      loss += weights[i] * weights[i]
    optimizer.minimize(loss)

  sess.run(op(step))
  np.testing.assert_allclose(weights.numpy(), [0.0, 0.0])  # w - 0.5 * 2w
