"""A tiny deterministic training job shared by the checkpoint and summary tests."""

import os

import keras
import numpy as np
import tensorflow as tf

import tfmon


class Job:
  """A 2-layer model trained with Adam on batches chosen by the global step.

  The batch of step k depends only on k, so a run resumed from a checkpoint sees
  exactly the batches an uninterrupted run would.
  """

  def __init__(self, init_seed=0):
    keras.utils.set_random_seed(init_seed)
    self.global_step = tfmon.train.get_or_create_global_step()
    self.model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(8, activation='relu'),
        keras.layers.Dense(3),
    ])
    self.optimizer = keras.optimizers.Adam(0.05)
    self.optimizer.build(self.model.trainable_variables)  # slots exist to restore into
    rng = np.random.default_rng(0)  # the same data whatever the initial values
    self.features = tf.constant(rng.normal(size=(16, 8, 4)).astype(np.float32))
    self.labels = tf.constant(rng.integers(0, 3, size=(16, 8)))
    self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @property
  def checkpoint(self):
    return {'model': self.model, 'optimizer': self.optimizer}

  def step(self):
    result = self.step_without_summaries()
    tf.summary.scalar('loss', result['loss'])
    return result

  def step_without_summaries(self):
    index = self.global_step % 16
    features, labels = self.features[index], self.labels[index]
    with tf.GradientTape() as tape:
      loss = self.loss_fn(labels, self.model(features, training=True))
    grads = tape.gradient(loss, self.model.trainable_variables)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    self.global_step.assign_add(1)
    return {'loss': loss}

  def variables(self):
    """Every model and optimizer variable, as numpy, in a fixed order."""
    return [v.numpy() for v in self.model.variables + self.optimizer.variables]

  def train(self, last_step, **session_kwargs):
    """Trains with MonitoredTrainingSession until `last_step`; returns the losses."""
    hooks = session_kwargs.pop('hooks', []) + [
        tfmon.train.StopAtStepHook(last_step=last_step)]
    losses = []
    with tfmon.train.MonitoredTrainingSession(
        checkpoint=self.checkpoint, hooks=hooks, **session_kwargs) as sess:
      while not sess.should_stop():
        losses.append(sess.run(self.step)['loss'])
    return losses


def forget_global_step():
  """Lets the next Job create a new global step, as a new process would."""
  tf.compat.v1.get_default_graph().clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)


def mirrored_strategy():
  """A MirroredStrategy over conftest's two CPUs whose collectives are keyed
  apart from those of the strategies made before it in the process.

  TensorFlow keys every MirroredStrategy of a process alike (group 1, instance
  keys from 100 on): a second strategy all-reducing other shapes at the same
  keys fails ("Shape mismatch in the collective instance 100"). Its class's
  `_collective_key_base` exists to set them apart in tests.
  """
  tf.distribute.MirroredStrategy._collective_key_base += 1000  # pylint: disable=protected-access
  return tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])


def worker_strategy():
  """In a worker process of a multi-worker test (TF_CONFIG set), its
  MultiWorkerMirroredStrategy, else None. Its collective ops time out after 30
  s: a worker left waiting alone in one (a regression) fails the test instead
  of hanging it."""
  if 'TF_CONFIG' not in os.environ:
    return None
  return tf.distribute.MultiWorkerMirroredStrategy(
      communication_options=tf.distribute.experimental.CommunicationOptions(
          timeout_seconds=30))
