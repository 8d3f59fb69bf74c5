"""Keras `Model.fit` with tfmon's hooks: checkpoints, summaries, log lines and a
stop step, as a MonitoredTrainingSession would give them.

    python examples/keras_fit_with_hooks.py [--train_dir /tmp/keras_fit] [--last_step 300]

Run it twice: the second run restores the checkpoint and, with last_step
reached, trains no step. Raise --last_step to train further: it resumes.
"""

import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # pylint: disable=g-import-not-at-top
import numpy as np
import tensorflow as tf

import tfmon
import tfmon.keras


class LoggedDense(keras.layers.Dense):
  """Writes its mean activation: recorded on SummarySaverHook's steps only."""

  def call(self, inputs):
    outputs = super().call(inputs)
    tf.summary.scalar('mean_activation', tf.reduce_mean(outputs))
    return outputs


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--train_dir', default='/tmp/keras_fit')
  parser.add_argument('--last_step', type=int, default=300)
  args = parser.parse_args()
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  rng = np.random.default_rng(0)
  features = rng.normal(size=(1024, 20)).astype(np.float32)
  labels = (features[:, :10].sum(axis=1) > 0).astype(np.int64)
  model = keras.Sequential([keras.Input((20,)), LoggedDense(32, activation='relu'),
                            keras.layers.Dense(2)])
  model.compile(keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=['accuracy'], steps_per_execution=10)
  model.optimizer.build(model.trainable_variables)  # slots restore at once
  saver = {'model': model, 'optimizer': model.optimizer}

  # Resume: the optimizer's iterations is the global step under fit, so it
  # comes back with the checkpoint.
  latest = tf.train.latest_checkpoint(args.train_dir)
  if latest:
    tf.train.Checkpoint(**saver).restore(latest).expect_partial()
    print(f'Restored {latest}')
  step = int(model.optimizer.iterations.numpy())
  if step >= args.last_step:
    # fit always runs one call, and a compiled metric fails at the end of an
    # epoch of no steps (docs/known-differences.md): stop here instead.
    print(f'Already at step {step} (--last_step {args.last_step}): nothing to train.')
    return

  hooks = [
      tfmon.train.CheckpointSaverHook(args.train_dir, save_steps=100, saver=saver),
      tfmon.train.SummarySaverHook(save_steps=50, output_dir=args.train_dir),
      tfmon.train.StepCounterHook(every_n_steps=100, output_dir=args.train_dir),
      tfmon.train.LoggingTensorHook(['loss', 'accuracy'], every_n_iter=100),
      tfmon.train.NanTensorHook('loss'),
      tfmon.train.StopAtStepHook(last_step=args.last_step),
  ]
  model.fit(features, labels, batch_size=32, epochs=100, verbose=0,
            callbacks=[tfmon.keras.HookCallback(hooks)])
  print(f'Stopped at step {int(model.optimizer.iterations.numpy())}; '
        f'tensorboard --logdir {args.train_dir}')


if __name__ == '__main__':
  main()
