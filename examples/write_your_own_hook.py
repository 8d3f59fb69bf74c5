r"""Writing your own hook: every method of SessionRunHook, used for something real.

`DivergenceGuard` watches the loss and the weights' norm every `every_n` runs:
  - begin():                 reset per-run state (a hook may serve several sessions);
  - after_create_session():  read the starting global step with the session;
  - before_run():            ask for nothing on most runs (they cost nothing), and on
                             its runs for the step's 'loss' (a key the step returns)
                             and a callable computing the weights' norm, which runs
                             in the same compiled call, after the step;
  - after_run():             stop training when the loss is small enough, or when
                             the norm explodes;
  - end():                   report.

  python examples/write_your_own_hook.py
"""

from absl import app
from absl import logging
import numpy as np
import tensorflow as tf

import tfmon


class DivergenceGuard(tfmon.train.SessionRunHook):
  """Stops training once the loss is below `target`, or the weights blow up.

  Args:
    weights: The variables whose global norm is watched.
    every_n: Check every this many runs.
    target: Stop when the loss falls below this.
    max_norm: Stop (with an error log) when the weights' norm exceeds this.
  """

  def __init__(self, weights, every_n=10, target=0.05, max_norm=1e3):
    if every_n < 1:
      raise ValueError(f'every_n={every_n} must be a positive number of runs.')
    self._weights = weights
    self._every_n = every_n
    self._target = target
    self._max_norm = max_norm

  def begin(self):
    self._runs = 0
    self.history = []

  def after_create_session(self, session, coord):
    self._start_step = int(session.run(tfmon.train.get_global_step()))

  def _weights_norm(self):
    return tf.linalg.global_norm(self._weights)

  def before_run(self, run_context):
    self._runs += 1
    if self._runs % self._every_n:
      return None
    return tfmon.train.SessionRunArgs({'loss': 'loss', 'norm': self._weights_norm})

  def after_run(self, run_context, run_values):
    if run_values.results is None:
      return
    loss, norm = run_values.results['loss'], run_values.results['norm']
    self.history.append((self._runs, float(loss), float(norm)))
    if norm > self._max_norm:
      logging.error('Weights norm %.1f exceeds %.1f: stopping.', norm, self._max_norm)
      run_context.request_stop()
    elif loss < self._target:
      logging.info('Loss %.4f reached the target %.4f after %d runs: stopping.',
                   loss, self._target, self._runs)
      run_context.request_stop()

  def end(self, session):
    step = int(session.run(tfmon.train.get_global_step()))
    logging.info('DivergenceGuard: trained from step %d to %d.', self._start_step, step)


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=(64, 3)).astype(np.float32))
  y = x @ tf.constant([[1.0], [-2.0], [0.5]])
  weights = tf.Variable(tf.zeros([3, 1]))
  global_step = tfmon.train.get_or_create_global_step()

  def train_step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((x @ weights - y) ** 2)
    weights.assign_sub(0.05 * tape.gradient(loss, weights))
    global_step.assign_add(1)
    return {'loss': loss}

  guard = DivergenceGuard([weights], every_n=10, target=0.05)
  with tfmon.train.MonitoredSession(
      hooks=[guard, tfmon.train.StopAtStepHook(last_step=1000)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_step))


if __name__ == '__main__':
  app.run(main)
