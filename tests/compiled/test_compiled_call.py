"""Feeds, results, and how often a call structure is traced."""

import collections
import gc
import threading
import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon.session import RawSession
from tests.kernels import kernels_run


class _TraceCounter:
  """A step function whose Python body runs once per trace, and is counted."""

  def __init__(self):
    self.traces = 0

  def __call__(self, x):
    self.traces += 1
    return {'y': x * 2.0}


@pytest.fixture
def sess():
  return RawSession()


def test_feeds_go_to_parameters_by_name(sess):
  def scale(x, factor=3.0):
    return x * factor

  assert sess.run(scale, feed_dict={'x': 2.0}) == 6.0
  assert sess.run(scale, feed_dict={'x': 2.0, 'factor': 0.5}) == 1.0


def test_kwargs_step_receives_every_feed(sess):
  def summed(**feeds):
    return tf.add_n([tf.cast(v, tf.float32) for v in feeds.values()])

  assert sess.run(summed, feed_dict={'a': 1.0, 'b': np.float32(2.0)}) == 3.0


def test_new_feed_values_never_retrace(sess):
  step = _TraceCounter()
  results = [sess.run(step, feed_dict={'x': value})['y']
             for value in (1.0, 2.0, np.float32(3.0), tf.constant(4.0))]
  assert results == [2.0, 4.0, 6.0, 8.0]
  assert step.traces == 1


def test_a_step_function_made_anew_every_run_warns_once(sess, caplog):
  counter = tf.Variable(0)
  for _ in range(8):
    sess.run(tfmon.train.op(lambda: counter.assign_add(1)))
  assert counter.numpy() == 8
  warnings = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
  assert len(warnings) == 1
  assert ('run() has traced 5 different step functions named '
          'test_a_step_function_made_anew_every_run_warns_once.<locals>.<lambda>: '
          'a step function created anew for every run') in warnings[0]
  assert 'Create it once, before the loop.' in warnings[0]

  caplog.clear()
  step = tfmon.train.op(lambda: counter.assign_add(1))
  for _ in range(8):
    sess.run(step)
  assert not [r for r in caplog.records if r.levelname == 'WARNING']


def test_a_changed_feed_shape_relaxes_once(sess):
  step = _TraceCounter()
  for rows in (4, 2, 5, 7, 4):
    result = sess.run(step, feed_dict={'x': np.ones((rows, 3), np.float32)})
    assert result['y'].shape == (rows, 3)
  assert step.traces == 2  # (4, 3), then (None, 3) for every other batch size


def test_a_hook_fetching_every_tenth_run_costs_no_trace():
  step_calls = _TraceCounter()
  global_step = tfmon.train.get_or_create_global_step()

  def train_step(x):
    global_step.assign_add(1)
    return step_calls(x)

  class EveryTenSteps(tfmon.train.SessionRunHook):

    def __init__(self):
      self.values = []
      self.iterations = 0

    def before_run(self, run_context):
      self.iterations += 1
      if self.iterations % 10 == 0:
        return tfmon.train.SessionRunArgs(['y', global_step])
      return None

    def after_run(self, run_context, run_values):
      if run_values.results is not None:
        self.values.append(run_values.results)

  hook = EveryTenSteps()
  with tfmon.train.MonitoredSession(hooks=[hook]) as session:
    for i in range(1000):
      session.run(tfmon.train.op(train_step), feed_dict={'x': float(i)})
    raw = session._coordinated_creator.tf_sess  # pylint: disable=protected-access
  assert step_calls.traces == 1
  # Runs without the hook's fetches, then with them: the second grows the
  # compiled function's outputs once; later runs of either kind reuse it.
  assert raw.compiled_functions == 2
  assert len(hook.values) == 100
  assert hook.values[0] == [18.0, 9]  # step 10 ran x=9; global step read before it
  assert hook.values[-1] == [2 * 999.0, 999]


def test_feed_key_that_no_step_takes_names_the_parameters(sess):
  def step(images, labels):
    return images + labels

  with pytest.raises(ValueError, match=r"feed_dict key 'lr' matches no parameter of "
                     r"the step functions in this call \(parameters: \{'.*step': "
                     r"\['images', 'labels'\]\}\)"):
    sess.run(step, feed_dict={'images': 1.0, 'labels': 2.0, 'lr': 0.1})


def test_feed_without_any_step_function(sess):
  with pytest.raises(ValueError, match='no step function is fetched'):
    sess.run('loss', feed_dict={'x': 1.0})


def test_missing_required_parameter_says_how_to_feed_it(sess):
  def step(images):
    return images

  with pytest.raises(ValueError, match=r"requires parameter 'images', but feed_dict "
                     r"has no 'images' key"):
    sess.run(step)


def test_non_string_feed_key_is_rejected(sess):
  with tf.Graph().as_default():
    placeholder = tf.compat.v1.placeholder(tf.float32)
  with pytest.raises(TypeError, match='tfmon feeds step functions by parameter name'):
    sess.run(lambda: tf.constant(1.0), feed_dict={placeholder: 1.0})


def test_unconvertible_feed_value_names_the_key(sess):
  with pytest.raises(TypeError, match=r"feed_dict\['x'\] = <object .*> cannot be "
                     'converted to a tensor'):
    sess.run(lambda x: x, feed_dict={'x': object()})


def test_a_failed_trace_is_not_cached(sess):
  attempts = []

  def step(x):
    attempts.append(1)
    if len(attempts) == 1:
      raise RuntimeError('first trace fails')
    return x

  with pytest.raises(RuntimeError, match='first trace fails'):
    sess.run(step, feed_dict={'x': 1.0})
  assert sess.run(step, feed_dict={'x': 5.0}) == 5.0


def test_results_keep_the_structure_tf_nest_gives(sess):
  Point = collections.namedtuple('Point', 'y x')
  fetches = {'b': [1, (2, Point(3, 4))], 'a': {'z': 5, 'c': [6]}, 'n': None}
  result = sess.run(fetches)
  assert result == {'b': [1, (2, Point(3, 4))], 'a': {'z': 5, 'c': [6]}, 'n': None}
  assert list(result) == ['b', 'a', 'n']  # the caller's key order
  assert isinstance(result['b'][1][1], Point)


def test_a_step_returning_nests_with_none_keeps_its_structure(sess):
  def step(x):
    return {'pair': (x, None), 'list': [x * 2.0], 'none': None}

  result = sess.run([step, step], feed_dict={'x': np.float32(1.5)})
  assert result[0] == {'pair': (1.5, None), 'list': [3.0], 'none': None}
  assert result[1] == result[0]
  assert isinstance(result[0]['list'][0], np.float32)


def test_a_runtime_error_names_the_op_and_where_the_step_defined_it(sess):
  def checked(x):
    return tf.debugging.check_numerics(x, 'x is not finite')

  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    sess.run(checked, feed_dict={'x': np.float32('nan')})
  message = str(error.value)
  assert 'x is not finite' in message
  assert 'Detected at node' in message
  assert 'test_compiled_call.py' in message  # the step's own source line
  assert sess.run(checked, feed_dict={'x': np.float32(2.0)}) == 2.0


def test_a_run_under_a_gradient_tape_gives_the_same_results(sess):
  weight = tf.Variable(3.0)

  def scaled(x):
    return weight * x

  assert sess.run(scaled, feed_dict={'x': 2.0}) == 6.0
  with tf.GradientTape():  # TF records the call: the session's slower path
    assert sess.run(scaled, feed_dict={'x': 2.0}) == 6.0
    assert sess.run([scaled, weight], feed_dict={'x': 1.0}) == [3.0, 3.0]


def test_run_counting_counts_a_constant_increment_and_reads_any_other(sess):
  global_step = tf.Variable(0, dtype=tf.int64)
  adds_two = tfmon.train.op(lambda: global_step.assign_add(2))
  # Counted from the value given, not read: proof that no read was made.
  assert sess.run_counting(adds_two, None, global_step, 100) == (None, 102)
  assert global_step.numpy() == 2
  # With no value before, read as the call left it.
  assert sess.run_counting(adds_two, None, global_step, None) == (None, 4)

  def adds_fed(n):
    global_step.assign_add(n)
    return {'n': n}

  # Data-dependent: read, whatever value is given.
  assert sess.run_counting(adds_fed, {'n': np.int64(3)}, global_step, 100) == (
      {'n': 3}, 7)


def test_runs_leave_no_garbage_cycles(sess):
  # Cycles wait for Python's cycle collector, whose full passes over TensorFlow's
  # and Keras' objects cost milliseconds: a run must not create any.
  def step():
    return {'loss': tf.constant(0.5), 'pair': (tf.constant(1), tf.constant(2))}

  fetches = {'step': [step, 'loss'], 'names': ('loss', None)}
  sess.run(fetches)
  gc.collect()
  gc.disable()
  try:
    for _ in range(200):
      sess.run(fetches)
    assert gc.collect() < 20  # per-run cycles would be 200 or more
  finally:
    gc.enable()


def test_a_stop_request_ends_a_fused_loop_at_the_next_step_boundary(sess):
  global_step = tf.Variable(0, dtype=tf.int64)
  weights = tf.Variable(tf.ones((400, 400)))

  def slow_step():  # some milliseconds a step
    weights.assign(tf.linalg.normalize(tf.matmul(weights, weights))[0])
    global_step.assign_add(1)

  _, after, steps = sess.run_fused(tfmon.train.op(slow_step), 1, 5, 2**62, global_step)
  assert (after, steps) == (5, 5)
  stopper = threading.Timer(0.3, sess.request_stop_at_step_boundary)
  stopper.start()
  _, after, steps = sess.run_fused(tfmon.train.op(slow_step), 1, 100_000, 2**62,
                                   global_step)
  stopper.join()
  assert sess.stop_requested
  assert 0 < steps < 100_000 and after == 5 + steps
  # Once requested, a run ends after its first step.
  _, after, steps = sess.run_fused(tfmon.train.op(slow_step), 1, 50, 2**62,
                                   global_step)
  assert steps == 1


def test_variables_a_step_creates_are_reported_before_it_first_runs(sess):
  # A TF1-style step creates its variables in its first trace; a listener
  # (the session's default checkpoint) can restore them before they train.
  def step():
    weights = tf.compat.v1.get_variable(
        'reported/weights', [3], initializer=tf.compat.v1.ones_initializer())
    weights.assign_add(tf.ones([3]))
    return {'sum': tf.reduce_sum(weights)}

  reported = []

  def restore(variables):
    reported.extend(v.name for v in variables)
    for variable in variables:
      variable.assign(tf.fill(variable.shape, 10.0))

  sess.add_variable_listener(restore)
  assert sess.run(step)['sum'] == 33.0  # restored to 10, then one step
  assert sess.run([step, 'sum'])[1] == 36.0
  assert reported == ['reported/weights:0']  # once, though two functions were built
  assert [v.name for v in sess.step_variables] == ['reported/weights:0']


def test_work_alongside_the_next_call_runs_after_its_trace_in_another_thread(sess):
  events = []
  counter = tf.Variable(0)

  def step():
    events.append('trace')
    return counter.assign_add(1)

  def work():
    events.append('work')
    return threading.current_thread()

  pending = sess.alongside_next_call(work)
  assert events == []  # queued, not started
  assert sess.run(step) == 1
  assert events == ['trace', 'work']  # after the trace: it would share the GIL
  assert pending.result() is not threading.main_thread()

  # Nothing started it: result() runs it in the caller's thread, and the next
  # run neither runs it again nor raises what it raised.
  assert sess.alongside_next_call(work).result() is threading.main_thread()
  with pytest.raises(ZeroDivisionError):
    sess.alongside_next_call(lambda: 1 / 0).result()
  assert sess.run(step) == 2
  assert events == ['trace', 'work', 'work']

  # Its exception is the run's, once the call has run.
  failing = sess.alongside_next_call(lambda: 1 / 0)
  with pytest.raises(ZeroDivisionError):
    sess.run(step)
  assert counter.numpy() == 3
  with pytest.raises(ZeroDivisionError):
    failing.result()
  assert sess.run(step) == 4  # nothing left queued


def test_work_alongside_may_make_a_call_and_may_be_cancelled(sess):
  counter = tf.Variable(0)
  ran = []

  def step():
    return counter.assign_add(1)

  # Awaited before any call started it, work that makes a call of its own runs
  # in the awaiting thread, once: that call finds it in its queue and does not
  # start it again (which once deadlocked: awaited in a thread, so a regression
  # fails rather than hangs).
  calling = sess.alongside_next_call(lambda: sess.run(step))
  results = []
  waiter = threading.Thread(target=lambda: results.append(calling.result()),
                            daemon=True)
  waiter.start()
  waiter.join(timeout=60)
  assert results == [1]
  assert sess.run(step) == 2

  # Cancelled before a call started it: it never runs.
  sess.alongside_next_call(lambda: ran.append('ran')).cancel()
  assert sess.run(step) == 3
  assert not ran


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']


def test_a_feed_whose_dtype_changes_warns_once_with_the_cast(sess, caplog):
  def step(x):
    return tf.reduce_sum(tf.cast(x, tf.float32))

  for dtype in (np.float32, np.float64, np.float64, np.float32, np.float64):
    sess.run(step, feed_dict={'x': np.ones(3, dtype)})
  assert _warnings(caplog) == [
      "feed_dict['x'] is float64 where the first run fed float32: the step is "
      'traced again for it. Cast it to the dtype the model computes in: '
      "feed_dict={'x': batch.astype(np.float32)} (numpy's floats are float64)."]


def test_a_float64_feed_meeting_float32_variables_warns_once(sess, caplog):
  weights = tf.Variable(np.ones((3, 1), np.float32), name='float32_weights')

  def step(x):
    return tf.matmul(tf.cast(x, tf.float32), weights)

  for _ in range(2):
    sess.run(step, feed_dict={'x': np.ones((2, 3))})  # numpy's float64
  sess.run(step, feed_dict={'x': np.ones((5, 3))})  # traced again: no new warning
  assert _warnings(caplog) == [
      "feed_dict['x'] is float64 and meets the step's float32 variables "
      '(float32_weights:0). Cast it to the dtype the model computes in: '
      "feed_dict={'x': batch.astype(np.float32)} (numpy's floats are float64)."]


def test_a_float64_feed_that_makes_a_float64_model_warns(sess, caplog):
  def step(x):  # TF1 style: the model takes the batch's dtype
    weights = tf.compat.v1.get_variable('made_from_feed/w', [3, 1], dtype=x.dtype)
    return tf.matmul(x, weights)

  sess.run(step, feed_dict={'x': np.ones((2, 3))})
  assert _warnings(caplog) == [
      "feed_dict['x'] is float64, and the step made float64 variables from it "
      '(made_from_feed/w:0): a float64 model, at half the speed. Cast it to the '
      "dtype the model computes in: feed_dict={'x': batch.astype(np.float32)} "
      "(numpy's floats are float64)."]


def test_a_float64_model_fed_float64_and_float32_feeds_do_not_warn(sess, caplog):
  weights = tf.Variable(np.ones((3, 1)), name='float64_weights')  # chosen float64
  sess.run(lambda x: tf.matmul(x, weights), feed_dict={'x': np.ones((2, 3))})
  sess.run(lambda y: y * 2.0, feed_dict={'y': np.ones(3, np.float32)})
  assert _warnings(caplog) == []


def test_a_trace_failing_on_a_float64_feed_says_which_feed(sess):
  weights = tf.Variable(np.ones((3, 1), np.float32))
  with pytest.raises(Exception) as raised:
    sess.run(lambda x: tf.matmul(x, weights), feed_dict={'x': np.ones((2, 3))})
  assert ("(feed_dict['x'] is float64, numpy's default for floats: if the step "
          "computes in float32, feed {'x': batch.astype(np.float32)}.)"
          in raised.value.__notes__)


@pytest.mark.parametrize('returns', [None, 'loss'])
def test_a_step_computes_only_what_it_needs_whatever_it_returns(returns):
  # A v1 optimizer's minimize(loss) groups each op's gradients in a `tuple`.
  # Grappler drops the unneeded ones (conv's gradient with respect to its input
  # images) from a function with outputs only: a step returning nothing
  # computed it too (BUILD_NOTES: 1.17x the CIFAR-10 tutorial's step).
  images = tf.constant(np.ones((2, 8, 8, 3), np.float32))
  filters = tf.Variable(tf.random.normal([3, 3, 3, 4]))
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)

  def step(images):
    loss = tf.reduce_sum(tf.nn.relu(tf.nn.conv2d(images, filters, 1, 'SAME')))
    optimizer.minimize(loss, var_list=[filters])
    return {'loss': loss} if returns else None

  before = filters.numpy()
  with tfmon.train.MonitoredSession() as sess:
    kernels = kernels_run(lambda: sess.run(step, feed_dict={'images': images}))
  assert not np.allclose(filters.numpy(), before)  # it trained
  assert any('Conv2DBackpropFilter' in op for op in kernels)
  assert not any('Conv2DBackpropInput' in op for op in kernels), kernels
