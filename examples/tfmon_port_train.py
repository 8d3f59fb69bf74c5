r"""examples/tf1_legacy_train.py ported to tfmon, kept as close line by line as it goes.

What changed, and why:
  - `tf.compat.v1.train.X` -> `tfmon.train.X`; eager execution stays on.
  - placeholders `x`, `y` -> parameters of the step function, fed by name.
  - the graph (logits, loss, minimize) -> the step function `train_op`, returning
    `{'loss': loss}` so hooks fetch the loss by name.
  - `tf.train.Saver` (implicit in MTS) -> `checkpoint={'weights': ..., 'bias': ...}`.
  - the hook is unchanged; it is given the name 'loss' instead of the loss tensor.

  python examples/tfmon_port_train.py --train_dir=/tmp/tfmon_run
"""

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import tfmon

_TRAIN_DIR = flags.DEFINE_string('train_dir', '/tmp/tfmon_port', 'Checkpoint directory.')
_MAX_STEPS = flags.DEFINE_integer('max_steps', 100, 'Global step to stop at.')
_LOG_EVERY = flags.DEFINE_integer('log_every', 10, 'Log the loss every N steps.')
_SAVE_STEPS = flags.DEFINE_integer('save_steps', 25, 'Checkpoint every N steps.')


def make_data(seed=0):
  rng = np.random.default_rng(seed)
  centers = rng.normal(scale=2.0, size=(3, 4)).astype(np.float32)
  labels = rng.integers(0, 3, size=(32, 16))
  features = centers[labels] + rng.normal(size=(32, 16, 4)).astype(np.float32)
  return features, labels


class LossLoggerHook(tfmon.train.SessionRunHook):
  """Logs `step N: loss = X` every `every_n` runs, counting runs itself."""

  def __init__(self, loss, every_n):
    self._loss = loss
    self._every_n = every_n

  def begin(self):
    self._step = 0

  def before_run(self, run_context):
    self._step += 1
    return tfmon.train.SessionRunArgs(self._loss)

  def after_run(self, run_context, run_values):
    if self._step % self._every_n == 0:
      logging.info('step %d: loss = %.4f', self._step, run_values.results)


def main(argv):
  del argv
  features, labels = make_data()
  global_step = tfmon.train.get_or_create_global_step()
  weights = tf.Variable(tf.zeros([4, 3]), name='weights')
  bias = tf.Variable(tf.zeros([3]), name='bias')
  optimizer = tf.keras.optimizers.SGD(0.1)

  def train_op(x, y):
    with tf.GradientTape() as tape:
      logits = tf.matmul(x, weights) + bias
      loss = tf.reduce_mean(
          tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    grads = tape.gradient(loss, [weights, bias])
    optimizer.apply_gradients(zip(grads, [weights, bias]))
    global_step.assign_add(1)
    return {'loss': loss}

  hooks = [tfmon.train.StopAtStepHook(last_step=_MAX_STEPS.value),
           LossLoggerHook('loss', _LOG_EVERY.value)]
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=_TRAIN_DIR.value, save_checkpoint_steps=_SAVE_STEPS.value,
      save_summaries_steps=None, log_step_count_steps=None, hooks=hooks,
      checkpoint={'weights': weights, 'bias': bias, 'optimizer': optimizer}) as sess:
    # The global step picks the batch, so a resumed run sees what an
    # uninterrupted one would. run_step_fn runs without hooks.
    step = sess.run_step_fn(lambda step_context: step_context.session.run(global_step))
    while not sess.should_stop():
      batch = step % len(features)
      step += 1
      sess.run(tfmon.train.op(train_op), feed_dict={'x': features[batch], 'y': labels[batch]})


if __name__ == '__main__':
  app.run(main)
