"""Input-pipeline state in checkpoints, and what cannot be checkpointed."""

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests.training import forget_global_step


class PipelineJob:
  """A step that pulls shuffled batches from a tf.data iterator and reports them."""

  def __init__(self):
    self.global_step = tfmon.train.get_or_create_global_step()
    dataset = tf.data.Dataset.range(64).shuffle(64, seed=7).batch(4).repeat()
    self.iterator = iter(dataset)
    self.total = tf.Variable(0, dtype=tf.int64)

  def step(self):
    batch = next(self.iterator)
    self.total.assign_add(tf.reduce_sum(batch))
    self.global_step.assign_add(1)
    return {'batch': batch}

  def train(self, last_step, checkpoint_dir=None):
    batches = []
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=checkpoint_dir,
        checkpoint={'total': self.total, 'iterator': self.iterator},
        save_checkpoint_steps=100, log_step_count_steps=None,
        save_summaries_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
      while not sess.should_stop():
        batches.append(sess.run(self.step)['batch'])
    return batches


def test_a_resumed_run_continues_with_the_next_unseen_batch(tmp_path):
  uninterrupted = PipelineJob().train(25)  # crosses an epoch and its reshuffle
  forget_global_step()
  first_part = PipelineJob().train(10, checkpoint_dir=str(tmp_path))
  forget_global_step()
  resumed = PipelineJob()  # a fresh iterator, as in a new process
  second_part = resumed.train(25, checkpoint_dir=str(tmp_path))
  assert len(first_part) == 10 and len(second_part) == 15
  np.testing.assert_array_equal(np.stack(first_part + second_part),
                                np.stack(uninterrupted))
  assert resumed.total.numpy() == sum(int(b.sum()) for b in uninterrupted)


def test_distributed_iterators_are_refused_with_the_reason():
  strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
  iterator = iter(strategy.experimental_distribute_dataset(
      tf.data.Dataset.range(8).batch(2)))
  with pytest.raises(TypeError, match=r"checkpoint\['iterator'\] is a distributed "
                     'iterator, which TensorFlow cannot checkpoint'):
    tfmon.train.Scaffold(checkpoint={'iterator': iterator})


def test_python_iterators_are_refused():
  with pytest.raises(TypeError, match='a Python generator or iterator is not'):
    tfmon.train.Scaffold(checkpoint={'iterator': iter([1, 2, 3])})
