r"""Quickstart: a small model trained under MonitoredTrainingSession, hooks at work.

Trains a 2-layer classifier on synthetic data read with tf.data. The session's
default hooks checkpoint to --train_dir and write TensorBoard summaries there;
StopAtStepHook ends the run at --max_steps; a custom hook (written exactly as for
tf.compat.v1.train) logs the loss every --log_every steps without reading anything
on the other steps. Run it again with a larger --max_steps and it resumes from
the last checkpoint.

  python -m tfmon.examples.quickstart [--train_dir=DIR] [--max_steps=300]
  tensorboard --logdir DIR
"""

import os
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import keras
import numpy as np
import tensorflow as tf

import tfmon

_TRAIN_DIR = flags.DEFINE_string(
    'train_dir', os.path.join(tempfile.gettempdir(), 'tfmon_quickstart'),
    'Where checkpoints and summaries go.')
_MAX_STEPS = flags.DEFINE_integer('max_steps', 300, 'Global step at which training stops.')
_LOG_EVERY = flags.DEFINE_integer('log_every', 50, 'Log the loss every this many steps.')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 64, 'Examples per step.')


class LossLoggerHook(tfmon.train.SessionRunHook):
  """Logs loss and accuracy every `every_n_steps` steps, fetching them only then."""

  def __init__(self, every_n_steps):
    self._every_n_steps = every_n_steps
    self.logged = []  # (global_step, loss, accuracy) per log line

  def begin(self):
    self._iteration = 0
    self._start = time.time()

  def before_run(self, run_context):
    self._iteration += 1
    if self._iteration % self._every_n_steps == 0:
      # A global-step variable is fetched as it was before the step ran.
      return tfmon.train.SessionRunArgs(
          {'loss': 'loss', 'accuracy': 'accuracy',
           'step': tfmon.train.get_global_step()})
    return None  # nothing fetched: this step costs the hook nothing

  def after_run(self, run_context, run_values):
    if run_values.results is None:
      return
    results = run_values.results
    step = int(results['step']) + 1
    elapsed = time.time() - self._start
    logging.info('step %d, loss = %.4f, accuracy = %.3f (%.1f steps/sec)', step,
                 results['loss'], results['accuracy'], self._every_n_steps / elapsed)
    self.logged.append((step, float(results['loss']), float(results['accuracy'])))
    self._start = time.time()


def synthetic_dataset(batch_size, seed=0):
  """Ten overlapping Gaussian clusters in 16 dimensions: learnable, no download."""
  rng = np.random.default_rng(seed)
  centers = rng.normal(scale=0.6, size=(10, 16)).astype(np.float32)
  labels = rng.integers(0, 10, size=4096)
  features = centers[labels] + rng.normal(size=(4096, 16)).astype(np.float32)
  return (tf.data.Dataset.from_tensor_slices((features, labels))
          .shuffle(4096, seed=seed).repeat().batch(batch_size))


def train(train_dir, max_steps, log_every, batch_size=64):
  """Trains until the global step reaches `max_steps`; returns the logger hook."""
  keras.utils.set_random_seed(0)
  global_step = tfmon.train.get_or_create_global_step()
  model = keras.Sequential([
      keras.Input((16,)),
      keras.layers.Dense(32, activation='relu'),
      keras.layers.Dense(10),
  ])
  optimizer = keras.optimizers.SGD(0.05)
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  batches = iter(synthetic_dataset(batch_size))

  def train_step():
    features, labels = next(batches)
    with tf.GradientTape() as tape:
      logits = model(features, training=True)
      loss = loss_fn(labels, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    global_step.assign_add(1)
    predictions = tf.argmax(logits, axis=1, output_type=labels.dtype)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(predictions, labels), tf.float32))
    tf.summary.scalar('loss', loss)  # recorded on SummarySaverHook's steps only
    tf.summary.scalar('accuracy', accuracy)
    return {'loss': loss, 'accuracy': accuracy}

  logger = LossLoggerHook(log_every)
  hooks = [tfmon.train.StopAtStepHook(last_step=max_steps), logger]
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=train_dir,
      checkpoint={'model': model, 'optimizer': optimizer},
      save_checkpoint_steps=100, save_summaries_steps=10,
      log_step_count_steps=100, hooks=hooks) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_step))  # results stay on the device
  logging.info('Done: global step %d. Checkpoints and summaries are in %s; view '
               'them with: tensorboard --logdir %s', int(global_step.numpy()),
               train_dir, train_dir)
  return logger


def main(argv):
  del argv
  logging.set_verbosity(logging.INFO)
  train(_TRAIN_DIR.value, _MAX_STEPS.value, _LOG_EVERY.value, _BATCH_SIZE.value)


if __name__ == '__main__':
  app.run(main)
