"""Estimator under RunConfig(train_distribute=MirroredStrategy), on conftest's
two logical CPUs: the model_fn built per replica trains the weights one device
trains on the whole batch, as TF <= 2.15's Estimator did."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from tests import training
from tfmon import estimator


def _mirrored():
  return training.mirrored_strategy()


def _data():
  features = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
  return features, features @ np.array([[1.], [2.], [3.], [4.]], np.float32)


def _input_fn(input_context=None):
  """Batches of 16, or under a strategy of its replicas' share: TF's Estimator
  dealt each replica a whole batch of input_fn in turn."""
  size = input_context.get_per_replica_batch_size(16) if input_context else 16
  return tf.data.Dataset.from_tensor_slices(_data()).repeat().batch(size)


def _model_fn(features, labels, mode, params):
  w = tf.compat.v1.get_variable('w', [4, 1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features, w)
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  if mode == estimator.ModeKeys.EVAL:
    return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})
  optimizer = (tf.compat.v1.train.AdamOptimizer(0.05) if params['optimizer'] == 'adam'
               else tf.compat.v1.train.GradientDescentOptimizer(0.05))
  train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class _Losses(tf.compat.v1.train.SessionRunHook):
  """Fetches the loss Estimator reports (the last in LOSSES) every run."""

  def begin(self):
    self._loss = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)[-1]
    self.values = []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._loss)

  def after_run(self, run_context, run_values):
    self.values.append(run_values.results)


def _train(directory, optimizer, **config):
  model = estimator.Estimator(_model_fn, model_dir=str(directory),
                              params={'optimizer': optimizer},
                              config=estimator.RunConfig(**config))
  losses = _Losses()
  model.train(_input_fn, steps=20, hooks=[losses])
  return model, losses.values


@pytest.mark.parametrize('optimizer', ['sgd', 'adam'])
def test_a_mirrored_model_fn_trains_as_one_device_on_the_whole_batch(tmp_path, optimizer):
  single, single_losses = _train(tmp_path / 'single', optimizer)
  mirrored, mirrored_losses = _train(tmp_path / 'mirrored', optimizer,
                                     train_distribute=_mirrored())
  names = single.get_variable_names()
  assert mirrored.get_variable_names() == names  # TF1 names, one copy each
  assert not any('replica' in name for name in names)
  for name in names:
    np.testing.assert_allclose(mirrored.get_variable_value(name),
                               single.get_variable_value(name), atol=1e-5, err_msg=name)
  assert mirrored.get_variable_value('global_step') == 20  # one update a step
  np.testing.assert_allclose(mirrored_losses, single_losses, rtol=1e-5, atol=1e-6)
  # The unreplicated EVAL graph restores the mirrored checkpoint.
  evaluation = mirrored.evaluate(_input_fn, steps=4)
  np.testing.assert_allclose(evaluation['loss'], single.evaluate(_input_fn, steps=4)['loss'],
                             rtol=1e-5)


def test_evaluation_under_eval_distribute_runs_unreplicated_and_says_so(tmp_path, caplog):
  with caplog.at_level(logging.INFO, logger='tensorflow'):
    model, _ = _train(tmp_path, 'sgd', train_distribute=_mirrored(),
                      eval_distribute=_mirrored())
  assert 'eval_distribute' in caplog.text and 'unreplicated' in caplog.text
  assert model.evaluate(_input_fn, steps=2)['global_step'] == 20


def test_an_input_fn_of_tensors_is_refused_under_a_mirrored_strategy(tmp_path):
  model = estimator.Estimator(_model_fn, model_dir=str(tmp_path), params={'optimizer': 'sgd'},
                              config=estimator.RunConfig(train_distribute=_mirrored()))
  features, labels = _data()
  with pytest.raises(TypeError, match='must return a tf.data.Dataset of per-replica'):
    model.train(lambda: (tf.constant(features), tf.constant(labels)), steps=1)
