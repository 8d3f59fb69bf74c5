"""tfmon.keras.HookCallback: tfmon's hooks inside Keras `Model.fit`, with a real model."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon
import tfmon.keras
from tests import event_files

_FEATURES = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
_LABELS = _FEATURES.sum(axis=1, keepdims=True)


class _SummaryDense(keras.layers.Dense):
  """A Dense layer that writes the mean of its output, as a model's own summary."""

  def call(self, inputs):
    outputs = super().call(inputs)
    tf.summary.scalar('mean_output', tf.reduce_mean(outputs))
    return outputs


def _model(steps_per_execution=1, layer=keras.layers.Dense):
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((4,)), layer(8, activation='relu'),
                            keras.layers.Dense(1)])
  model.compile(keras.optimizers.SGD(0.01), loss='mse',
                steps_per_execution=steps_per_execution)
  return model


def _fit(model, hooks, epochs=3, **kwargs):
  """8 batches of 8 an epoch."""
  return model.fit(_FEATURES, _LABELS, batch_size=8, epochs=epochs, verbose=0,
                   shuffle=False, callbacks=[tfmon.keras.HookCallback(hooks)],
                   **kwargs)


def _lines(caplog, text):
  return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def _builtin_hooks(logdir, model):
  return [tfmon.train.CheckpointSaverHook(
              logdir, save_steps=5, saver={'model': model,
                                           'optimizer': model.optimizer}),
          tfmon.train.SummarySaverHook(save_steps=5, output_dir=logdir),
          tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=3),
          tfmon.train.NanTensorHook('loss'),
          tfmon.train.StopAtStepHook(last_step=13)]


def _session_job(logdir, caplog):
  """The same hooks around a MonitoredSession's step: the reference."""
  model = _model(layer=_SummaryDense)
  global_step = tfmon.train.get_or_create_global_step()
  batches = iter(tf.data.Dataset.from_tensor_slices((_FEATURES, _LABELS))
                 .batch(8).repeat())

  def step():
    features, labels = next(batches)
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(keras.losses.mean_squared_error(labels, model(features)))
    model.optimizer.apply(tape.gradient(loss, model.trainable_variables),
                          model.trainable_variables)
    global_step.assign_add(1)
    return {'loss': loss}

  with tfmon.train.MonitoredSession(hooks=_builtin_hooks(logdir, model)) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  return int(global_step.numpy())


def _summary_steps(logdir):
  """Steps of the model's own `mean_output` summary (its tag has Keras' scopes)."""
  accumulator = event_files.events(logdir)
  tag, = [t for t in accumulator.Tags()['tensors'] if t.endswith('/mean_output')]
  return event_files.steps(accumulator, tag)


def _checkpoint_steps(logdir):
  return sorted(int(name[len('model.ckpt-'):-len('.index')])
                for name in os.listdir(logdir) if name.endswith('.index'))


@pytest.mark.parametrize('steps_per_execution', [1, 4])
def test_builtin_hooks_write_the_files_and_lines_a_session_writes_at_its_steps(
    tmp_path, caplog, steps_per_execution):
  caplog.set_level(logging.INFO)
  assert _session_job(str(tmp_path / 'session'), caplog) == 13
  session_lines = _lines(caplog, 'Saving checkpoints for')
  session_logged = len(_lines(caplog, 'loss = '))
  caplog.clear()
  tf.compat.v1.get_default_graph().clear_collection(
      tf.compat.v1.GraphKeys.GLOBAL_STEP)

  model = _model(steps_per_execution, layer=_SummaryDense)
  logdir = str(tmp_path / 'fit')
  _fit(model, _builtin_hooks(logdir, model))

  assert int(model.optimizer.iterations.numpy()) == 13  # StopAtStepHook, exactly
  assert _checkpoint_steps(logdir) == _checkpoint_steps(str(tmp_path / 'session'))
  assert _checkpoint_steps(logdir) == [0, 5, 10, 13]
  assert _lines(caplog, 'Saving checkpoints for') == [
      line.replace(str(tmp_path / 'session'), logdir) for line in session_lines]
  assert len(_lines(caplog, 'loss = ')) == session_logged == 5  # runs 0, 3, 6, 9, 12
  assert _summary_steps(logdir) == _summary_steps(str(tmp_path / 'session')) == [
      1, 6, 11]
  # The optimizer's iterations served as the global step for the fit only.
  assert tfmon.train.get_global_step() is None
  restored = tf.train.load_checkpoint(os.path.join(logdir, 'model.ckpt-13'))
  assert restored.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == 13


def test_a_registered_global_step_is_incremented_once_per_step(tmp_path):
  global_step = tfmon.train.get_or_create_global_step()
  model = _model(steps_per_execution=4)
  _fit(model, [tfmon.train.CheckpointSaverHook(
      str(tmp_path), save_steps=10,
      saver={'model': model, 'optimizer': model.optimizer})], epochs=2)
  assert int(global_step.numpy()) == 16
  assert _checkpoint_steps(str(tmp_path)) == [0, 10, 16]


class _Fetcher(tfmon.train.SessionRunHook):
  """Fetches a name of the logs, a variable and a callable every run."""

  def __init__(self, variable):
    self._variable = variable
    self.seen = []

  def before_run(self, run_context):
    return tfmon.train.SessionRunArgs(
        {'loss': 'loss', 'before': self._variable,
         'after': lambda: tf.identity(self._variable)})

  def after_run(self, run_context, run_values):
    self.seen.append(run_values.results)
    if len(self.seen) == 3:
      run_context.request_stop()


def test_fetches_resolve_to_logs_pre_run_variables_and_post_run_callables():
  model = _model()
  hook = _Fetcher(model.optimizer.iterations)
  history = _fit(model, [hook])
  assert len(history.history['loss']) == 1  # request_stop ended fit after run 3
  assert int(model.optimizer.iterations.numpy()) == 3
  assert [(int(r['before']), int(r['after'])) for r in hook.seen] == [
      (0, 1), (1, 2), (2, 3)]
  assert all(np.isfinite(r['loss']) for r in hook.seen)


class _V1Hook(tfmon.train.SessionRunHook):
  """Declares no schedule: needs every step."""

  def before_run(self, run_context):
    return tfmon.train.SessionRunArgs('loss')


def test_a_hook_needing_every_step_is_refused_with_steps_per_execution():
  with pytest.raises(ValueError, match=r'_V1Hook.*every step.*steps_per_execution=4'):
    _fit(_model(steps_per_execution=4), [_V1Hook()])


def test_an_unknown_name_lists_the_logs():
  with pytest.raises(ValueError, match=r"'lost'.*\['loss'\]"):
    _fit(_model(), [tfmon.train.LoggingTensorHook(['lost'], every_n_iter=1)])


def test_wrong_hooks_fail_at_construction():
  with pytest.raises(TypeError, match='hook'):
    tfmon.keras.HookCallback(tfmon.train.StopAtStepHook(last_step=1))
  with pytest.raises(TypeError, match=r'HookCallback hooks\[0\]'):
    tfmon.keras.HookCallback([keras.callbacks.History()])


@pytest.mark.parametrize('steps_per_execution', [1, 4])
def test_nan_loss_raises_or_stops(steps_per_execution):
  labels = _LABELS.copy()
  labels[20] = np.nan  # batch 3
  model = _model(steps_per_execution)
  with pytest.raises(tfmon.train.NanLossDuringTrainingError):
    model.fit(_FEATURES, labels, batch_size=8, verbose=0, shuffle=False,
              callbacks=[tfmon.keras.HookCallback([tfmon.train.NanTensorHook('loss')])])
  model = _model(steps_per_execution)
  model.fit(_FEATURES, labels, batch_size=8, epochs=2, verbose=0, shuffle=False,
            callbacks=[tfmon.keras.HookCallback(
                [tfmon.train.NanTensorHook('loss', fail_on_nan_loss=False)])])
  # Keras' logs are epoch averages: the NaN shows from batch 3 on. Fused calls
  # see it at the end of the call holding it.
  assert int(model.optimizer.iterations.numpy()) == (3 if steps_per_execution == 1
                                                     else 4)


def test_a_finished_job_runs_no_step(tmp_path):
  model = _model()
  saver = {'model': model, 'optimizer': model.optimizer}
  _fit(model, [tfmon.train.StopAtStepHook(last_step=5)])
  assert int(model.optimizer.iterations.numpy()) == 5
  _fit(model, [tfmon.train.StopAtStepHook(last_step=5),
               tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=2,
                                               saver=saver)])
  assert int(model.optimizer.iterations.numpy()) == 5
  assert _checkpoint_steps(str(tmp_path)) == [5]


def test_evaluation_and_early_stopping_hooks_work_under_fit(tmp_path):
  model = _model()
  validation = tf.data.Dataset.from_tensor_slices((_FEATURES, _LABELS)).batch(16)

  def eval_step(features, labels):
    return {'loss': tf.reduce_mean(keras.losses.mean_squared_error(
        labels, model(features)))}

  evaluation = tfmon.train.EvaluationHook(eval_step, validation, every_n_steps=4,
                                          summary_dir=str(tmp_path))
  # A loss that must fall by nothing to count: stops once it does not fall.
  stop = tfmon.train.stop_if_lower_hook(evaluation, 'loss', threshold=1e9,
                                        run_every_steps=4, run_every_secs=None)
  _fit(model, [evaluation, stop], epochs=5)
  # Evaluated at step 4, then at the end; stopped once the threshold was met,
  # ending fit long before its 40 steps.
  steps = int(model.optimizer.iterations.numpy())
  assert list(evaluation.results_by_step) == [4, steps] and steps < 8
  assert os.listdir(tmp_path / 'eval')
