"""One worker of the multi-worker tests (tests/session/test_multiworker.py).

Run with TF_CONFIG set and one JSON argument (see `main`); prints one JSON line
starting with RESULT: what this worker saw.
"""

import json
import os
import signal
import sys
import time

import tensorflow as tf

import tfmon


class _Act(tfmon.train.SessionRunHook):
  """At a global step on one worker: sends a signal to this process."""

  def __init__(self, task, step, signame):
    self._task, self._step, self._signame = task, step, signame

  def after_run(self, run_context, run_values):
    if run_context.global_step_after == self._step and self._task == TASK:
      os.kill(os.getpid(), getattr(signal, self._signame))


class _Sleep(tfmon.train.SessionRunHook):
  """Makes each run last a while on one worker, so timers in seconds fire."""

  def __init__(self, task, seconds):
    self._task, self._seconds = task, seconds

  def after_run(self, run_context, run_values):
    if self._task == TASK:
      time.sleep(self._seconds)


class _CountRuns(tfmon.train.SessionRunHook):
  """A chief-only hook: counts the runs it sees."""

  runs = 0

  def after_run(self, run_context, run_values):
    _CountRuns.runs += 1


TASK = None


def main(config):
  global TASK
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  strategy = tf.distribute.MultiWorkerMirroredStrategy()  # from TF_CONFIG
  TASK = strategy.cluster_resolver.task_id
  with strategy.scope():
    global_step = tfmon.train.get_or_create_global_step()
    weights = tf.Variable(tf.zeros([4, 1]), name='weights')
    # Saving a sync-on-read variable sums it over the workers: a collective op,
    # so a save that the workers did not make together would fail or hang.
    examples = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM, trainable=False)
  # Each worker its own batch, the same at every step.
  features = tf.random.stateless_normal([8, 4], seed=[TASK, 1])
  labels = tf.reduce_sum(features, axis=1, keepdims=True)
  nan_task, nan_step = config.get('nan_at', (-1, -1))

  def replica_step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((features @ weights - labels) ** 2) / 2  # 2 replicas
    grad = tf.distribute.get_replica_context().all_reduce('SUM', tape.gradient(loss, weights))
    weights.assign_sub(0.05 * grad)
    examples.assign_add(8.0)
    return loss

  def train_step():
    loss = strategy.reduce('SUM', strategy.run(replica_step), axis=None)
    global_step.assign_add(1)
    # A value only this worker sees: NaN on one worker at one step.
    local = tf.where(tf.logical_and(global_step == nan_step, TASK == nan_task),
                     float('nan'), 0.0)
    return {'loss': loss, 'local': local}

  hooks = [tfmon.train.StopAtStepHook(last_step=config['last_step']),
           tfmon.train.NanTensorHook(
               'local', fail_on_nan_loss=config.get('fail_on_nan', False))]
  if 'act_at' in config:
    hooks.append(_Act(*config['act_at']))
  if 'sleep' in config:
    hooks.append(_Sleep(*config['sleep']))
  count_runs = _CountRuns()
  # A legacy hook keeps the chief's runs to one step; one that observes fused
  # runs lets it fuse them too.
  count_runs.observes_fused_runs = config.get('chief_fuses', False)
  chief_only_hooks = [tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=10),
                      count_runs]
  result = {'task': TASK}
  try:
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=config['train_dir'],
        checkpoint={'weights': weights, 'examples': examples},
        save_checkpoint_steps=config.get('save_steps', 20),
        save_checkpoint_secs=config.get('save_secs'),
        hooks=hooks, chief_only_hooks=chief_only_hooks,
        steps_per_loop=config.get('steps_per_loop', 1), strategy=strategy) as sess:
      result['start'] = int(global_step.numpy())
      while not sess.should_stop():
        sess.run(tfmon.train.op(train_step))
  finally:
    result.update(step=int(global_step.numpy()), chief_hook_runs=_CountRuns.runs,
                  weights=weights.numpy().ravel().tolist())
    print('RESULT:' + json.dumps(result), flush=True)


if __name__ == '__main__':
  main(json.loads(sys.argv[1]))
