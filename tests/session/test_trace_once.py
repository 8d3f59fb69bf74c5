"""A session traces each step function once, whatever its hooks observe (SPEC §2)."""

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests.training import Job


class _Counted:
  """Wraps a step function; counts how often its Python body runs (= traces)."""

  def __init__(self, fn):
    self.fn = fn
    self.traces = 0
    self.__name__ = getattr(fn, '__name__', 'step')

  def __call__(self, *args, **kwargs):
    self.traces += 1
    return self.fn(*args, **kwargs)


class _LegacyHook(tfmon.train.SessionRunHook):
  """A v1 hook as users write them: asks for nothing, every run."""

  def __init__(self):
    self.runs = 0

  def before_run(self, run_context):
    self.runs += 1
    return None


def _scenario(tmp_path, steps_per_loop, legacy_hook=False):
  """Issue 14's scenario: MonitoredTrainingSession defaults and the usual hooks."""
  job = Job()
  step = _Counted(job.step)
  dataset = tf.data.Dataset.from_tensor_slices(
      (job.features[0], job.labels[0])).batch(4)

  def eval_fn(features, labels):
    return {'loss': job.loss_fn(labels, job.model(features))}

  eval_step = _Counted(eval_fn)
  logged = tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=50)
  hooks = [logged, tfmon.train.NanTensorHook('loss'),
           tfmon.train.StopAtStepHook(last_step=1000),
           tfmon.train.EvaluationHook(eval_step, dataset, every_n_steps=400,
                                      summary_dir=str(tmp_path))]
  if legacy_hook:
    hooks.append(_LegacyHook())
  runs = 0
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint=job.checkpoint,
      save_checkpoint_steps=300, hooks=hooks,
      steps_per_loop=steps_per_loop) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
      runs += 1
    raw = sess._coordinated_creator.tf_sess  # pylint: disable=protected-access
  return job, step, eval_step, raw, runs


@pytest.mark.parametrize('steps_per_loop', [1, 100])
def test_the_issue_scenario_traces_its_step_once(tmp_path, steps_per_loop):
  job, step, eval_step, raw, runs = _scenario(tmp_path, steps_per_loop)
  assert int(job.global_step.numpy()) == 1000
  assert step.traces == 1
  assert eval_step.traces == 1
  # Compiled functions: the training call's and the evaluation's.
  assert raw.compiled_functions == 2
  if steps_per_loop == 1:
    assert runs == 1000
  else:
    assert runs < 30  # runs end at the hooks' steps, and only there
  # Every duty still happened: checkpoints, summaries and evaluations.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-1000')
  assert (tmp_path / 'eval').is_dir()


def test_a_legacy_hook_asking_nothing_costs_no_trace(tmp_path):
  job, step, _, raw, runs = _scenario(tmp_path, steps_per_loop=100, legacy_hook=True)
  assert runs == 1000  # a v1 hook keeps every run to one step
  assert step.traces == 1
  assert raw.compiled_functions == 2


def test_feeds_of_a_new_shape_trace_once_more_and_no_more():
  global_step = tfmon.train.get_or_create_global_step()
  weights = tf.Variable(np.ones((3, 1), np.float32))

  def step(x):
    global_step.assign_add(1)
    return {'loss': tf.reduce_sum(tf.matmul(x, weights))}

  step = _Counted(step)
  logged = tfmon.train.LoggingTensorHook(['loss'], every_n_iter=2)
  with tfmon.train.MonitoredSession(hooks=[logged]) as sess:
    for rows in (4, 4, 5, 6, 4, 7):
      sess.run(tfmon.train.op(step), feed_dict={'x': np.ones((rows, 3), np.float32)})
    raw = sess._coordinated_creator.tf_sess  # pylint: disable=protected-access
  assert step.traces == 2  # (4, 3), then (None, 3) for any other batch size
  # Per feed signature, one function for the runs that log and one for those
  # that fetch nothing: 2 x 2, however many shapes follow.
  assert raw.compiled_functions == 4


def test_a_graph_name_asked_for_later_costs_one_more_trace():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    tf.identity(tf.cast(global_step, tf.float32) * 10.0, name='scaled_step')
    return {'loss': tf.constant(1.0)}

  step = _Counted(step)

  class FromStepThree(tfmon.train.SessionRunHook):

    def __init__(self):
      self.runs = 0
      self.values = []

    def before_run(self, run_context):
      self.runs += 1
      return tfmon.train.SessionRunArgs('scaled_step') if self.runs >= 3 else None

    def after_run(self, run_context, run_values):
      if run_values.results is not None:
        self.values.append(run_values.results)

  hook = FromStepThree()
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for _ in range(5):
      sess.run(tfmon.train.op(step))
  assert step.traces == 2
  assert hook.values == [30.0, 40.0, 50.0]


def test_an_unknown_name_is_the_error_itself_with_what_exists():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    tf.identity(tf.constant(2.0), name='softmax_tensor')
    return {'loss': tf.constant(1.0)}

  with tfmon.train.MonitoredSession() as sess:
    with pytest.raises(ValueError) as raised:
      sess.run([tfmon.train.op(step), 'lsos'])
    assert str(raised.value) == (
        "Fetch name 'lsos' names no tensor or variable of this call, whose step "
        "functions return ['loss']; nearest names: ['loss'].")
    # The session is still usable, and the step was traced once.
    assert sess.run([tfmon.train.op(step), 'loss'])[1] == 1.0


def test_runs_where_every_hook_is_idle_use_a_function_without_their_outputs():
  # An output nobody reads still costs a small step ~10 µs: runs in which the
  # idle hook fetches nothing use a second function, built once.
  global_step = tfmon.train.get_or_create_global_step()
  step = _Counted(lambda: {'loss': tf.cast(global_step.assign_add(1), tf.float32)})
  logged = tfmon.train.LoggingTensorHook(['loss'], every_n_iter=3)
  with tfmon.train.MonitoredSession(hooks=[logged]) as sess:
    for _ in range(7):
      sess.run(tfmon.train.op(step))
    raw = sess._coordinated_creator.tf_sess  # pylint: disable=protected-access
  assert step.traces == 1
  assert raw.compiled_functions == 2


def _lazy_keras_job(checkpoint_dir, last_step):
  """A Keras model without Input, built by its first call, inside the step."""
  keras = pytest.importorskip('keras')
  keras.utils.set_random_seed(0)
  global_step = tfmon.train.get_or_create_global_step()
  model = keras.Sequential([keras.layers.Dense(4, activation='relu'),
                            keras.layers.Dense(1)])
  optimizer = keras.optimizers.SGD(0.1, momentum=0.9)

  def step(x, y):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    global_step.assign_add(1)
    return {'loss': loss}

  step = _Counted(step)
  x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(checkpoint_dir), save_checkpoint_steps=2,
      hooks=[tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
    while not sess.should_stop():
      sess.run(step, feed_dict={'x': x, 'y': x.sum(axis=1, keepdims=True)})
  return step, model, optimizer


def test_a_step_that_builds_its_model_in_its_first_trace_traces_once(tmp_path):
  step, model, optimizer = _lazy_keras_job(tmp_path, last_step=3)
  assert step.traces == 1  # as Keras fit, which builds the model before its trace
  # The default checkpoint holds what the trace created: model and slots.
  saved = {name for name, _ in tf.train.list_variables(
      tf.train.latest_checkpoint(str(tmp_path)))}
  for variable in model.variables + optimizer.variables:
    key = variable.value.name.split(':')[0].replace('/', '.S')
    assert f'variables/{key}/.ATTRIBUTES/VARIABLE_VALUE' in saved, (key, saved)


def test_a_tf1_style_step_making_its_variables_traces_once():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    weights = tf.compat.v1.get_variable('trace_once/w', [2],
                                        initializer=tf.compat.v1.ones_initializer())
    optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
    return {'loss': tf.reduce_sum(weights),
            'train': optimizer.minimize(lambda: tf.reduce_sum(weights * weights),
                                        var_list=[weights], global_step=global_step)}

  step = _Counted(step)
  with tfmon.train.MonitoredSession() as sess:
    losses = [sess.run(step)['loss'] for _ in range(3)]
  assert step.traces == 1
  assert losses[0] == 2.0 and losses[2] < losses[1] < losses[0]
