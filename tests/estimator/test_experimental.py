"""tfmon.estimator.experimental: in-memory evaluation, the stop hook, logit helpers."""

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import tfmon
from tfmon import estimator


def model_fn(features, labels, mode):
  w = tf.compat.v1.get_variable('w', [], initializer=tf.compat.v1.zeros_initializer())
  predictions = features * w
  loss = tf.reduce_mean((predictions - labels) ** 2)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(
      loss, tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(
      mode, loss=loss, train_op=train_op, predictions=predictions,
      eval_metric_ops={'w': tf.compat.v1.metrics.mean(w)})


def _input():
  x = np.arange(1, 5, dtype=np.float32)
  return tf.data.Dataset.from_tensors((x, 2 * x)).repeat()


def _eval_input():
  x = np.arange(1, 5, dtype=np.float32)
  return tf.data.Dataset.from_tensors((x, 2 * x))


def test_in_memory_evaluator_evaluates_the_training_values_every_n_runs(tmp_path):
  config = estimator.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
  hook = estimator.experimental.InMemoryEvaluatorHook(
      model, _eval_input, every_n_iter=3, name='memory')
  model.train(_input, hooks=[hook], max_steps=7)
  assert model.latest_checkpoint() is None  # evaluated without checkpoints
  events = event_accumulator.EventAccumulator(model.eval_dir('memory'))
  events.Reload()
  values = {e.step: e.value for e in events.Scalars('w')}
  # As TF's: when the session starts, every 3 runs, and at the end; each with the
  # training graph's value of w at that step.
  assert sorted(values) == [0, 3, 6, 7]
  assert 0 == values[0] < values[3] < values[6] < values[7] < 2


def test_in_memory_evaluator_misuse_fails_early(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='every_n_iter should be a positive number'):
    estimator.experimental.InMemoryEvaluatorHook(model, _eval_input, every_n_iter=0)
  with pytest.raises(TypeError, match='must be a tfmon.estimator.Estimator'):
    estimator.experimental.InMemoryEvaluatorHook(object(), _eval_input)


def test_make_stop_at_checkpoint_step_hook_is_the_chiefs_stop_at_step(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path))
  hook = estimator.experimental.make_stop_at_checkpoint_step_hook(model, 4)
  assert isinstance(hook, tfmon.train.StopAtStepHook)
  model.train(_input, hooks=[hook])
  assert model.get_variable_value('global_step') == 4


def test_call_logit_fn_passes_what_the_logit_fn_names():
  features = {'x': tf.constant([[1.0]])}
  logits = estimator.experimental.call_logit_fn(
      lambda features, params: features['x'] * params['scale'], features,
      estimator.ModeKeys.TRAIN, {'scale': 3.0}, None)
  assert logits.numpy().tolist() == [[3.0]]
  with pytest.raises(ValueError, match='logit_fn should have features argument'):
    estimator.experimental.call_logit_fn(lambda x: x, features, 'train', {}, None)
  with pytest.raises(ValueError, match='logit_fn should return a Tensor'):
    estimator.experimental.call_logit_fn(lambda features: 1, features, 'train', {}, None)
