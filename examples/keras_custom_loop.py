r"""A TF2 custom training loop with a Keras model, given tfmon hooks.

The loop is the one TF2 guides teach (`for x, y in dataset: train_step(x, y)`);
the only change is that each step goes through `sess.run`, so hooks, checkpoints
and summaries come with it. The batch is fed by parameter name: tensors from the
dataset pass straight in, and new values never retrace.

  python examples/keras_custom_loop.py --train_dir=/tmp/keras_loop
"""

from absl import app
from absl import flags
from absl import logging
import keras
import numpy as np
import tensorflow as tf

import tfmon

_TRAIN_DIR = flags.DEFINE_string('train_dir', '/tmp/keras_loop', 'Where to save.')
_EPOCHS = flags.DEFINE_integer('epochs', 3, 'Passes over the data.')


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  features = rng.normal(size=(512, 8)).astype(np.float32)
  labels = (features[:, 0] + features[:, 1] > 0).astype(np.int64)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(512).batch(32)

  model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation='relu'),
                            keras.layers.Dense(2)])
  optimizer = keras.optimizers.Adam(0.01)
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  accuracy = keras.metrics.SparseCategoricalAccuracy()
  global_step = tfmon.train.get_or_create_global_step()

  @tf.function  # tfmon traces it inline into its own compiled call
  def train_step(x, y):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = loss_fn(y, logits)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    accuracy.update_state(y, logits)
    tf.summary.scalar('loss', loss)
    global_step.assign_add(1)
    return {'loss': loss, 'accuracy': accuracy.result()}

  class EpochEndLogger(tfmon.train.SessionRunHook):
    """Fetches the running accuracy only on the runs it is told to log."""

    def __init__(self):
      self.log_next = False

    def before_run(self, run_context):
      if self.log_next:
        return tfmon.train.SessionRunArgs({'accuracy': 'accuracy',
                                           'step': global_step})
      return None

    def after_run(self, run_context, run_values):
      if run_values.results is not None:
        logging.info('step %d: running accuracy = %.3f',
                     run_values.results['step'] + 1, run_values.results['accuracy'])
        self.log_next = False

  epoch_logger = EpochEndLogger()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=_TRAIN_DIR.value,
      checkpoint={'model': model, 'optimizer': optimizer},
      save_checkpoint_steps=16, save_summaries_steps=4,
      hooks=[epoch_logger]) as sess:
    for epoch in range(_EPOCHS.value):
      batches = len(dataset)
      for i, (x, y) in enumerate(dataset):
        epoch_logger.log_next = i == batches - 1
        sess.run(tfmon.train.op(train_step), feed_dict={'x': x, 'y': y})
      logging.info('epoch %d done', epoch + 1)


if __name__ == '__main__':
  app.run(main)
