"""One task of the Estimator multi-worker tests (test_multi_worker.py): the
chief, a worker or the evaluator of TF_CONFIG, running `train_and_evaluate`
under RunConfig(train_distribute=MultiWorkerMirroredStrategy()); with no
TF_CONFIG, the same in one process on the whole batch.

Run with the model_dir as its argument; prints one JSON line starting with
RESULT: what this task saw.
"""

import json
import sys

import numpy as np
import tensorflow as tf

from tests import training

from tfmon import estimator

_BATCH = 16  # the global batch: 8 a worker
_MAX_STEPS = 20


def _data():
  features = np.random.default_rng(0).normal(size=(4 * _BATCH, 4)).astype(np.float32)
  return features, features @ np.array([[1.], [2.], [3.], [4.]], np.float32) + 0.5


def input_fn(input_context=None):
  dataset = tf.data.Dataset.from_tensor_slices(_data()).repeat()
  if input_context is None:
    return dataset.batch(_BATCH)
  # TF's recipe: each worker its share of every global batch.
  return dataset.batch(input_context.get_per_replica_batch_size(_BATCH)).shard(
      input_context.num_input_pipelines, input_context.input_pipeline_id)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices(_data()).batch(_BATCH)


def model_fn(features, labels, mode):
  w = tf.compat.v1.get_variable('w', [4, 1], initializer=tf.compat.v1.zeros_initializer())
  b = tf.compat.v1.get_variable('b', [1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features, w) + b
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  if mode == estimator.ModeKeys.EVAL:
    return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})
  train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(model_dir):
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  strategy = training.worker_strategy()  # None without TF_CONFIG
  config = estimator.RunConfig(model_dir=model_dir, train_distribute=strategy,
                               save_checkpoints_steps=10, log_step_count_steps=5)
  model = estimator.Estimator(model_fn, config=config)
  result, exports = estimator.train_and_evaluate(
      model, estimator.TrainSpec(input_fn, max_steps=_MAX_STEPS),
      estimator.EvalSpec(eval_input_fn, steps=2, start_delay_secs=0, throttle_secs=1))
  print('RESULT:' + json.dumps({
      'task': config.task_type, 'is_chief': config.is_chief,
      'eval': None if result is None else {k: float(v) for k, v in result.items()},
      'exports': exports,
      'w': model.get_variable_value('w').ravel().tolist() + model.get_variable_value('b').tolist(),
  }), flush=True)


if __name__ == '__main__':
  main(sys.argv[1])
