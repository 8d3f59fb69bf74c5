"""What a run can fetch, how each kind of leaf is computed, and bad fetches."""

import collections

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon.session import RawSession


@pytest.fixture
def sess():
  return RawSession()


def test_nests_of_every_leaf_kind_come_back_as_numpy(sess):
  v = tf.Variable(2.0)
  Pair = collections.namedtuple('Pair', 'first second')

  def step():
    return {'double': v * 2.0, 'parts': (v + 1.0, None)}

  result = sess.run({
      'step': step,
      'named': ['double', Pair(v, np.arange(3))],
      'constant': tf.constant([1, 2]),
      'number': 3.5,
      'nothing': None,
  })
  assert result['step']['double'] == np.float32(4.0)
  assert isinstance(result['step']['double'], np.float32)
  assert result['step']['parts'][0] == 3.0 and result['step']['parts'][1] is None
  assert result['named'][0] == 4.0
  assert isinstance(result['named'][1], Pair)
  assert result['named'][1].first == 2.0
  np.testing.assert_array_equal(result['named'][1].second, [0, 1, 2])
  np.testing.assert_array_equal(result['constant'], [1, 2])
  assert isinstance(result['constant'], np.ndarray)
  assert result['number'] == 3.5 and result['nothing'] is None


def test_variable_is_read_before_the_steps_of_the_call(sess):
  v = tf.Variable(1.0)

  def step():
    v.assign_add(10.0)
    return v.read_value()

  before, after = sess.run([v, step])
  assert before == 1.0
  assert after == 11.0


def test_callables_run_in_flattened_order_and_once_each(sess):
  counter = tf.Variable(0)

  def increment():
    counter.assign_add(1)
    return counter.read_value()

  def read():
    return counter.read_value()

  first, again, seen = sess.run([increment, increment, read])
  assert first == again == seen == 1
  assert counter.numpy() == 1


def test_op_runs_the_step_and_returns_none(sess):
  v = tf.Variable(0.0)

  def step():
    v.assign_add(1.0)
    return {'value': v.read_value()}

  assert sess.run(tfmon.train.op(step)) is None
  assert v.numpy() == 1.0
  result = sess.run([tfmon.train.op(step), 'value'])
  assert result == [None, 2.0]


def test_names_resolve_to_returned_keys_then_graph_tensor_names(sess):
  def step():
    logits = tf.constant([[1.0, 3.0]])
    tf.nn.softmax(logits, name='softmax_tensor')
    return {'loss': tf.constant(0.25)}

  loss, probabilities, same = sess.run([
      'loss', 'softmax_tensor', 'softmax_tensor:0', tfmon.train.op(step)])[:3]
  assert loss == 0.25
  np.testing.assert_allclose(probabilities, [[0.11920292, 0.880797]], rtol=1e-5)
  np.testing.assert_array_equal(probabilities, same)


def test_tf_function_steps_trace_inline_so_their_names_resolve(sess):
  class Model:

    @tf.function
    def step(self, x):
      return tf.identity(x * 3.0, name='tripled')

  @tf.function
  def plain_step(x):
    return tf.identity(x + 1.0, name='incremented')

  model = Model()
  result = sess.run([tfmon.train.op(model.step), tfmon.train.op(plain_step),
                     'tripled', 'incremented'], feed_dict={'x': 2.0})
  assert result[2:] == [6.0, 3.0]


def test_a_name_of_a_variable_fetches_it_as_the_variable(sess):
  weights = tf.Variable(1.0, name='fetched_by_name')

  def step():
    weights.assign_add(1.0)
    return {'loss': weights * 10.0}

  # Its value when the call starts, as a fetched variable's; then after a step.
  assert sess.run([tfmon.train.op(step), 'fetched_by_name', 'fetched_by_name:0',
                   weights, 'loss']) == [None, 1.0, 1.0, 1.0, 20.0]
  assert sess.run(['fetched_by_name', step]) == [2.0, {'loss': 30.0}]


def test_a_name_of_the_global_step_resolves_in_fused_runs_too():
  global_step = tfmon.train.get_or_create_global_step()
  seen = []

  class EveryFourSteps(tfmon.train.SessionRunHook):

    def steps_until_observed(self, step):
      return 4 - step % 4

    def before_run(self, run_context):
      return tfmon.train.SessionRunArgs('global_step')

    def after_run(self, run_context, run_values):
      seen.append(int(run_values.results))

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=None, steps_per_loop=8, hooks=[
          EveryFourSteps(), tfmon.train.StopAtStepHook(last_step=8)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(lambda: global_step.assign_add(1)))
  assert seen[-2:] == [3, 7]  # before the step that reaches 4 and 8


def test_a_name_ending_two_variables_names_them(sess):
  first = tf.Variable(1.0, name='a/kernel')
  second = tf.Variable(2.0, name='b/kernel')
  with pytest.raises(ValueError, match=r"Fetch name 'kernel' names 2 variables of "
                     r"this call \(\['a/kernel:0', 'b/kernel:0'\]\): fetch the "
                     r"variable itself\."):
    sess.run([tfmon.train.op(lambda: first + second), 'kernel'])


def test_an_unknown_name_is_one_sentence_with_the_returned_keys_and_nearest_names(sess):
  weights = tf.Variable(2.0, name='dense/kernel')

  def step():
    tf.identity(weights * 3.0, name='softmax_tensor')
    tf.summary.scalar('accuracy', 1.0)  # internal tensors: not listed
    return {'loss': tf.constant(1.0)}

  with pytest.raises(ValueError) as error:
    sess.run([tfmon.train.op(step), 'softmax_tensr'])
  assert str(error.value) == (
      "Fetch name 'softmax_tensr' names no tensor or variable of this call, whose "
      "step functions return ['loss']; nearest names: ['softmax_tensor'].")
  with pytest.raises(ValueError) as error:
    sess.run([tfmon.train.op(step), 'dense/kernal'])
  assert str(error.value).endswith("nearest names: ['dense/kernel'].")
  with pytest.raises(ValueError, match=r"'zzz' names no tensor .* nearest names: none\.$"):
    sess.run([tfmon.train.op(step), 'zzz'])


def test_fetch_of_invalid_type_names_the_value_and_what_is_accepted(sess):
  with pytest.raises(TypeError, match=r'Fetch argument <object .*> has invalid type '
                     r'object\. Fetch a step function'):
    sess.run([object()])


def test_graph_tensor_fetch_is_rejected(sess):
  with tf.Graph().as_default():
    graph_tensor = tf.constant(1.0)
  with pytest.raises(TypeError, match='is a graph tensor'):
    sess.run(graph_tensor)


def test_non_numeric_step_result_names_the_step(sess):
  def describe():
    return {'label': 'not a tensor'}

  with pytest.raises(TypeError, match=r"Step function .*describe returned 'not a "
                     r"tensor' of type str, which is not numeric"):
    sess.run(describe)


def test_op_of_a_non_callable_is_rejected():
  with pytest.raises(TypeError, match=r'op\(\) takes a step function'):
    tfmon.train.op('loss')


def test_step_that_raises_propagates_its_error_and_the_session_stays_usable(sess):
  calls = {'n': 0}

  def flaky():
    calls['n'] += 1
    if calls['n'] == 1:
      raise ValueError('bad batch')
    return tf.constant(1.0)

  with pytest.raises(ValueError, match='bad batch') as error:
    sess.run(flaky)
  assert 'in flaky' in str(error.value)  # autograph names the user code
  if hasattr(error.value, '__notes__'):
    assert 'flaky' in error.value.__notes__[0]
  assert sess.run(flaky) == 1.0


def test_run_inside_tf_function_is_refused(sess):
  @tf.function
  def nested():
    return sess.run(lambda: tf.constant(1.0))

  with pytest.raises(RuntimeError, match='runs eagerly'):
    nested()


def test_run_after_close_is_refused(sess):
  sess.close()
  with pytest.raises(RuntimeError, match='closed Session'):
    sess.run(None)
