"""Sessions under tf.distribute: MirroredStrategy over conftest's two CPU devices."""

import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests import event_files
from tests.training import forget_global_step


def _mirrored():
  return tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])


class RegressionJob:
  """Linear regression on batches of 16, each split across `strategy`'s replicas.

  Each replica's loss is its share of the whole batch's mean, so two replicas,
  whose gradients the optimizer sums, train exactly as one device on the batch.
  """

  def __init__(self, strategy, seed=0):
    self.strategy = strategy
    with strategy.scope():
      keras.utils.set_random_seed(seed)
      self.model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
      self.optimizer = keras.optimizers.SGD(0.05)
      self.global_step = tfmon.train.get_or_create_global_step()
    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 4)).astype(np.float32)
    labels = features @ np.array([[1.], [2.], [3.], [4.]], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16)
    self._batches = iter(strategy.experimental_distribute_dataset(dataset))

  def step(self):
    def replica_step(features, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum((self.model(features) - labels) ** 2) / 16
      grads = tape.gradient(loss, self.model.trainable_variables)
      self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
      return loss

    losses = self.strategy.run(replica_step, args=next(self._batches))
    self.global_step.assign_add(1)
    loss = self.strategy.reduce('SUM', losses, axis=None)
    tf.summary.scalar('loss', loss)
    return {'loss': loss}

  def train(self, last_step, **session_kwargs):
    """Trains with MonitoredTrainingSession until `last_step`."""
    with tfmon.train.MonitoredTrainingSession(
        checkpoint={'model': self.model, 'optimizer': self.optimizer},
        hooks=[tfmon.train.StopAtStepHook(last_step=last_step),
               tfmon.train.NanTensorHook('loss')],
        **session_kwargs) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(self.step))

  def weights(self):
    return [v.numpy() for v in self.model.weights]


def _checkpoint_steps(directory):
  state = tf.train.get_checkpoint_state(str(directory))
  return [int(path.rsplit('-', 1)[-1]) for path in state.all_model_checkpoint_paths]


@pytest.mark.parametrize('steps_per_loop', [1, 4])
def test_two_replicas_train_as_one_device_on_the_whole_batch(tmp_path, steps_per_loop):
  one_device = RegressionJob(tf.distribute.get_strategy())
  one_device.train(10, checkpoint_dir=str(tmp_path / 'one'), save_checkpoint_steps=5,
                   save_summaries_steps=4)
  forget_global_step()
  strategy = _mirrored()
  job = RegressionJob(strategy)
  job.train(10, checkpoint_dir=str(tmp_path / 'two'), save_checkpoint_steps=5,
            save_summaries_steps=4, strategy=strategy, steps_per_loop=steps_per_loop)

  assert job.global_step.numpy() == 10
  for mine, theirs in zip(job.weights(), one_device.weights()):
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
  kernel = job.model.weights[0].value  # the tf.Variable inside the Keras one
  first, second = strategy.experimental_local_results(kernel)
  assert first.device != second.device
  np.testing.assert_array_equal(first.numpy(), second.numpy())  # replicas agree
  assert _checkpoint_steps(tmp_path / 'two') == [0, 5, 10]
  two, one = event_files.events(tmp_path / 'two'), event_files.events(tmp_path / 'one')
  assert event_files.steps(two, 'loss') == event_files.steps(one, 'loss') == [1, 5, 9]
  np.testing.assert_allclose(event_files.values(two, 'loss'),
                             event_files.values(one, 'loss'), rtol=1e-5)


@pytest.mark.parametrize('restoring_strategy', ['mirrored', 'one device'])
def test_a_mirrored_checkpoint_restores_under_any_strategy(tmp_path, restoring_strategy):
  strategy = _mirrored()
  trained = RegressionJob(strategy)
  trained.train(6, checkpoint_dir=str(tmp_path), save_checkpoint_steps=3,
                strategy=strategy)
  forget_global_step()
  strategy = (_mirrored() if restoring_strategy == 'mirrored'
              else tf.distribute.get_strategy())
  resumed = RegressionJob(strategy, seed=1)
  assert not np.allclose(resumed.weights()[0], trained.weights()[0])
  resumed.train(6, checkpoint_dir=str(tmp_path), strategy=strategy)  # stops at once
  assert resumed.global_step.numpy() == 6
  for mine, theirs in zip(resumed.weights(), trained.weights()):
    np.testing.assert_array_equal(mine, theirs)


class VariableMakingHook(tfmon.train.SessionRunHook):
  """Creates a variable in `begin`, as v1 hooks built their ops there."""

  def begin(self):
    self.variable = tf.Variable(0.)


@pytest.mark.parametrize('given_as', ['scope', 'argument'])
def test_hooks_and_steps_run_in_the_strategy_scope(tmp_path, given_as):
  strategy = _mirrored()
  hook = VariableMakingHook()
  job = RegressionJob(strategy)
  strategies_seen = []

  def step():
    strategies_seen.append(tf.distribute.get_strategy())  # while tracing
    return job.step()

  hooks = [hook, tfmon.train.StopAtStepHook(last_step=2)]
  if given_as == 'scope':  # the default: the strategy in scope at construction
    with strategy.scope():
      session = tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                                     hooks=hooks)
  else:
    session = tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                                   hooks=hooks, strategy=strategy)
  with session:  # runs outside the scope
    while not session.should_stop():
      session.run(step)
  assert job.global_step.numpy() == 2
  assert strategy.extended.variable_created_in_scope(hook.variable)
  assert strategies_seen and all(seen is strategy for seen in strategies_seen)


def test_steps_outside_any_strategy_run_as_before():
  assert not tf.distribute.has_strategy()
  seen = []
  with tfmon.train.MonitoredSession() as session:
    session.run(lambda: seen.append(tf.distribute.has_strategy()))
  assert seen == [False]


def test_a_strategy_that_is_not_one_is_refused():
  with pytest.raises(TypeError, match=r"strategy='mirrored' is not a tf.distribute"
                                      r'.Strategy: pass one such as'):
    tfmon.train.MonitoredTrainingSession(strategy='mirrored')


def test_a_strategy_other_than_the_one_in_scope_is_refused():
  inside, other = _mirrored(), _mirrored()
  with inside.scope():
    with pytest.raises(ValueError, match='differs from .* whose scope this session '
                                         'is created in'):
      tfmon.train.MonitoredSession(strategy=other)


def test_a_step_returning_one_value_per_replica_is_told_to_reduce_it():
  strategy = _mirrored()
  with tfmon.train.MonitoredSession(strategy=strategy) as session:
    with pytest.raises(TypeError, match=r"one value per replica.*strategy.reduce\("
                                        r"'SUM', value, axis=None\)"):
      session.run(lambda: strategy.run(lambda: tf.constant(1.)))
    local = session.run(lambda: strategy.experimental_local_results(
        strategy.run(lambda: tf.constant(1.))))
  assert local == (1., 1.)


@pytest.mark.slow
def test_importing_tfmon_leaves_tensorflow_configurable():
  # Devices and collective ops (MultiWorkerMirroredStrategy) can only be set up
  # before TensorFlow initializes: importing tfmon must not initialize it.
  code = ('import tensorflow as tf, tfmon\n'
          'tf.config.set_logical_device_configuration(\n'
          "    tf.config.list_physical_devices('CPU')[0],\n"
          '    [tf.config.LogicalDeviceConfiguration()] * 2)\n'
          "print(len(tf.config.list_logical_devices('CPU')))\n")
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split()[-1] == '2'


def test_xla_under_several_replicas_is_refused():
  # XLA cannot compile a step spanning devices; TF's own error says so only at
  # the first run, as "Trying to access resource ... located in device".
  with pytest.raises(ValueError, match=r"jit_compile=True with .*MirroredStrategy.*"
                                      r"spans its 2 replicas' devices"):
    tfmon.train.MonitoredTrainingSession(strategy=_mirrored(), jit_compile=True)


def test_a_model_made_outside_the_strategy_scope_is_refused_at_creation():
  strategy = _mirrored()
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])  # no scope
  # Else the first step fails inside Keras' optimizer with a bare AssertionError.
  with pytest.raises(ValueError, match=r"Variable 'sequential.*/dense.*/kernel:0' was "
                     r'created outside the scope of .*MirroredStrategy.* Create the '
                     r'model and optimizer inside `with strategy.scope\(\):`'):
    tfmon.train.MonitoredTrainingSession(checkpoint={'model': model}, strategy=strategy)
