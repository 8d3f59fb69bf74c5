r"""A legacy TF1 training script: graph mode, placeholders, MonitoredTrainingSession.

This is the "before" of examples/tfmon_port_train.py, which ports it line by line.
It trains a softmax classifier with a custom SessionRunHook that logs the loss
every --log_every steps, checkpoints every --save_steps steps and stops at
--max_steps.

  python examples/tf1_legacy_train.py --train_dir=/tmp/tf1_run
"""

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

_TRAIN_DIR = flags.DEFINE_string('train_dir', '/tmp/tf1_legacy', 'Checkpoint directory.')
_MAX_STEPS = flags.DEFINE_integer('max_steps', 100, 'Global step to stop at.')
_LOG_EVERY = flags.DEFINE_integer('log_every', 10, 'Log the loss every N steps.')
_SAVE_STEPS = flags.DEFINE_integer('save_steps', 25, 'Checkpoint every N steps.')


def make_data(seed=0):
  rng = np.random.default_rng(seed)
  centers = rng.normal(scale=2.0, size=(3, 4)).astype(np.float32)
  labels = rng.integers(0, 3, size=(32, 16))
  features = centers[labels] + rng.normal(size=(32, 16, 4)).astype(np.float32)
  return features, labels


class LossLoggerHook(tf.train.SessionRunHook):
  """Logs `step N: loss = X` every `every_n` runs, counting runs itself."""

  def __init__(self, loss, every_n):
    self._loss = loss
    self._every_n = every_n

  def begin(self):
    self._step = 0

  def before_run(self, run_context):
    self._step += 1
    return tf.train.SessionRunArgs(self._loss)

  def after_run(self, run_context, run_values):
    if self._step % self._every_n == 0:
      logging.info('step %d: loss = %.4f', self._step, run_values.results)


def main(argv):
  del argv
  tf.disable_eager_execution()
  features, labels = make_data()
  global_step = tf.train.get_or_create_global_step()
  x = tf.placeholder(tf.float32, [None, 4], name='x')
  y = tf.placeholder(tf.int64, [None], name='y')
  weights = tf.get_variable('weights', [4, 3], initializer=tf.zeros_initializer())
  bias = tf.get_variable('bias', [3], initializer=tf.zeros_initializer())
  logits = tf.matmul(x, weights) + bias
  loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)

  hooks = [tf.train.StopAtStepHook(last_step=_MAX_STEPS.value),
           LossLoggerHook(loss, _LOG_EVERY.value)]
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=_TRAIN_DIR.value, save_checkpoint_steps=_SAVE_STEPS.value,
      save_summaries_steps=None, log_step_count_steps=None, hooks=hooks) as sess:
    # The global step picks the batch, so a resumed run sees what an
    # uninterrupted one would. run_step_fn runs without hooks.
    step = sess.run_step_fn(lambda step_context: step_context.session.run(global_step))
    while not sess.should_stop():
      batch = step % len(features)
      step += 1
      sess.run(train_op, feed_dict={x: features[batch], y: labels[batch]})


if __name__ == '__main__':
  app.run(main)
