"""One worker of the multi-worker tests of captured TF1 graphs
(tests/session/test_graph_multiworker.py), or with no TF_CONFIG, the same
training in one process on the whole batch.

Run with one JSON argument (see `main`); prints one JSON line starting with
RESULT: what this process saw.
"""

import json
import os
import signal
import sys

import numpy as np
import tensorflow as tf

import tfmon
from tests import training

WORKERS = 2
_ROWS = 8  # a worker's share of a step's batch
_TRUE_WEIGHTS = np.array([[1.], [2.], [3.], [4.]], np.float32)


def _data(steps):
  """Every step's whole batch: `steps * WORKERS * _ROWS` rows, in step order."""
  features = np.random.default_rng(0).normal(
      size=(steps * WORKERS * _ROWS, 4)).astype(np.float32)
  return features, features @ _TRUE_WEIGHTS + 0.5


class _At(tfmon.train.SessionRunHook):
  """At a global step, on one worker only: asks to stop, or sends a signal."""

  def __init__(self, task, step, action):
    self._task, self._step, self._action = task, step, action

  def after_run(self, run_context, run_values):
    if run_context.global_step_after != self._step or TASK != self._task:
      return
    if self._action == 'stop':
      run_context.request_stop()
    else:
      os.kill(os.getpid(), getattr(signal, self._action))


TASK = 0


def main(config):
  global TASK
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  strategy = training.worker_strategy()  # None without TF_CONFIG
  if strategy is not None:
    TASK = strategy.cluster_resolver.task_id
  features, labels = _data(config.get('data_steps', 40))
  feeding = config.get('input', 'feed') == 'feed'

  def build(input_context=None):
    if feeding:
      x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
      y = tf.compat.v1.placeholder(tf.float32, [None, 1], name='y')
    else:
      batch = _ROWS * (WORKERS if input_context is None else 1)
      dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch)
      if input_context is not None:
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
      x, y = tf.compat.v1.data.make_one_shot_iterator(dataset.repeat()).get_next()
    w = tf.compat.v1.get_variable('w', [4, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable('b', [1], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.compat.v1.losses.mean_squared_error(y, tf.matmul(x, w) + b)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = (tf.compat.v1.train.AdamOptimizer(0.05) if config.get('optimizer') == 'adam'
                 else tf.compat.v1.train.GradientDescentOptimizer(0.05))
    return {'x': x, 'y': y, 'loss': loss, 'w': w, 'b': b,
            'train_op': optimizer.minimize(loss, global_step=global_step)}

  graph, model = tfmon.train.capture_graph(build, strategy=strategy)
  # tfmon's StopAtStepHook lets runs fuse steps; TF's sees every step.
  stop_at = (tfmon.train.StopAtStepHook if config.get('steps_per_loop', 1) > 1
             else tf.compat.v1.train.StopAtStepHook)
  hooks = [stop_at(last_step=config['last_step'])]
  if 'at' in config:
    hooks.append(_At(*config['at']))
  result = {'task': TASK}
  try:
    with graph.as_default():
      global_step = tf.compat.v1.train.get_global_step()
      if config.get('session') == 'tf':  # TF's own, as a TF1 script keeps it
        session = tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=config['train_dir'], save_checkpoint_steps=10, hooks=hooks,
            is_chief=TASK == 0)
      else:
        session = tfmon.train.MonitoredTrainingSession(
            checkpoint_dir=config['train_dir'], save_checkpoint_steps=10, hooks=hooks,
            steps_per_loop=config.get('steps_per_loop', 1))
      with session as sess:
        result['start'], result['runs'] = int(sess.run(global_step)), 0
        while not sess.should_stop():
          feeds = None
          if feeding:
            step = int(sess.run(global_step)) % config.get('data_steps', 40)
            rows = slice(step * WORKERS * _ROWS, (step + 1) * WORKERS * _ROWS)
            if strategy is not None:  # this worker's share
              share = rows.start + TASK * _ROWS
              rows = slice(share, share + _ROWS)
            feeds = {model['x']: features[rows], model['y']: labels[rows]}
          sess.run(model['train_op'], feed_dict=feeds)
          result['runs'] += 1
  finally:  # read eagerly, out of the graph
    result.update(step=int(global_step.numpy()),
                  w=model['w'].numpy().ravel().tolist(),
                  b=model['b'].numpy().ravel().tolist())
    print('RESULT:' + json.dumps(result), flush=True)

if __name__ == '__main__':
  main(json.loads(sys.argv[1]))
