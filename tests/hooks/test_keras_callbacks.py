"""KerasCallbackHook: Keras callbacks inside a MonitoredSession, with a real model."""

import csv
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon

_FEATURES = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
_LABELS = _FEATURES.sum(axis=1, keepdims=True)


class _Job:
  """A compiled Keras model trained by a step function in a MonitoredSession."""

  def __init__(self, labels=_LABELS, repeat=None, constant_loss=False):
    keras.utils.set_random_seed(0)
    self.model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
                                   keras.layers.Dense(1)])
    self.model.compile(keras.optimizers.SGD(0.01), loss='mse')
    self.global_step = tfmon.train.get_or_create_global_step()
    dataset = tf.data.Dataset.from_tensor_slices((_FEATURES, labels)).batch(8)
    batches = iter(dataset.repeat(repeat))
    model = self.model

    def step():
      features, targets = next(batches)
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.mean_squared_error(targets,
                                                              model(features)))
      model.optimizer.apply(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables)
      self.global_step.assign_add(tf.cast(tf.size(targets) > 0, tf.int64))
      return {'loss': tf.ones_like(loss) if constant_loss else loss,
              'mae': tf.reduce_mean(tf.abs(targets - model(features)))}

    self.step = step

  def run(self, hook, last_step=None):
    hooks = [hook] + ([tfmon.train.StopAtStepHook(last_step=last_step)]
                      if last_step else [])
    with tfmon.train.MonitoredSession(hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(self.step))
    return int(self.global_step.numpy())


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def test_csv_logger_writes_a_row_per_epoch_of_steps_per_epoch(tmp_path):
  job = _Job()
  path = str(tmp_path / 'log.csv')
  hook = tfmon.train.KerasCallbackHook([keras.callbacks.CSVLogger(path)],
                                       steps_per_epoch=4, logs=['loss', 'mae'])
  assert job.run(hook, last_step=12) == 12
  rows = _rows(path)
  assert [row['epoch'] for row in rows] == ['0', '1', '2']
  assert all(float(row['loss']) > 0 and float(row['mae']) > 0 for row in rows)


def test_without_steps_per_epoch_the_epoch_ends_with_the_data(tmp_path):
  job = _Job(repeat=2)  # 16 batches, then OutOfRangeError ends the session
  path = str(tmp_path / 'log.csv')
  job.run(tfmon.train.KerasCallbackHook([keras.callbacks.CSVLogger(path)]))
  assert [row['epoch'] for row in _rows(path)] == ['0']


def test_early_stopping_stops_the_session_at_the_epoch_it_decides(tmp_path):
  job = _Job(constant_loss=True)  # never improves after epoch 0
  hook = tfmon.train.KerasCallbackHook(
      [keras.callbacks.EarlyStopping('loss', patience=2)], steps_per_epoch=5)
  assert job.run(hook, last_step=100) == 15  # epochs 0, 1, 2 of 5 steps


def test_terminate_on_nan_stops_at_the_nan_step():
  labels = _LABELS.copy()
  labels[20] = np.nan  # batch 3
  job = _Job(labels=labels)
  hook = tfmon.train.KerasCallbackHook([keras.callbacks.TerminateOnNaN()])
  assert job.run(hook, last_step=100) == 3


def test_model_checkpoint_tensorboard_and_reduce_lr_act_on_the_model(tmp_path,
                                                                     capsys):
  job = _Job(constant_loss=True)
  callbacks = [
      keras.callbacks.ModelCheckpoint(str(tmp_path / 'epoch{epoch}.keras'),
                                      monitor='loss'),
      keras.callbacks.TensorBoard(str(tmp_path / 'tb'), update_freq=2),
      keras.callbacks.ReduceLROnPlateau('loss', patience=1, factor=0.5),
      keras.callbacks.ProgbarLogger()]
  hook = tfmon.train.KerasCallbackHook(callbacks, model=job.model,
                                       steps_per_epoch=4)
  assert job.run(hook, last_step=12) == 12
  assert sorted(os.listdir(tmp_path)) == ['epoch1.keras', 'epoch2.keras',
                                          'epoch3.keras', 'tb']
  restored = keras.models.load_model(str(tmp_path / 'epoch3.keras'))
  np.testing.assert_allclose(restored.get_weights()[0], job.model.get_weights()[0])
  assert os.listdir(tmp_path / 'tb' / 'train')
  # Loss 1.0 every epoch: no improvement after epoch 0, halved after 1 and 2.
  assert float(job.model.optimizer.learning_rate.numpy()) == pytest.approx(0.0025)
  assert '4/4' in capsys.readouterr().out  # the progress bar


def test_callbacks_that_cannot_work_are_refused_with_the_reason(tmp_path):
  with pytest.raises(ValueError, match='BackupAndRestore.*checkpoint_dir'):
    tfmon.train.KerasCallbackHook(
        [keras.callbacks.BackupAndRestore(str(tmp_path))])
  with pytest.raises(ValueError, match=r'ModelCheckpoint.*model=model'):
    tfmon.train.KerasCallbackHook(
        [keras.callbacks.ModelCheckpoint(str(tmp_path / 'm.keras'))])
  with pytest.raises(ValueError, match='restore_best_weights'):
    tfmon.train.KerasCallbackHook(
        [keras.callbacks.EarlyStopping(restore_best_weights=True)])
  with pytest.raises(TypeError, match=r'callbacks\[0\]'):
    tfmon.train.KerasCallbackHook([tfmon.train.StopAtStepHook(last_step=1)])
  with pytest.raises(ValueError, match='steps_per_epoch=0'):
    tfmon.train.KerasCallbackHook([], steps_per_epoch=0)


def test_a_monitored_name_the_step_does_not_return_fails_at_the_first_run():
  job = _Job()
  hook = tfmon.train.KerasCallbackHook([keras.callbacks.EarlyStopping()])  # val_loss
  with pytest.raises(ValueError, match='val_loss'):
    job.run(hook, last_step=3)
