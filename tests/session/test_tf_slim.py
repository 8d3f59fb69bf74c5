"""tf-slim's `training.train`, the loop of many real TF1 programs (TF's own
MonitoredTrainingSession), on a captured graph as under TF1."""

import numpy as np
import tensorflow as tf

import tfmon

slim = __import__('pytest').importorskip('tf_slim')


def _train(graph_class, directory):
  with graph_class().as_default():
    tf.compat.v1.set_random_seed(3)
    x = tf.constant(np.ones([8, 3], np.float32))
    y = tf.constant(np.ones([8, 1], np.float32))
    weights = tf.compat.v1.get_variable('w', [3, 1])
    tf.compat.v1.losses.add_loss(tf.reduce_mean((tf.matmul(x, weights) - y) ** 2))
    total_loss = tf.compat.v1.losses.get_total_loss()
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    train_op = slim.training.create_train_op(total_loss, optimizer)
    return slim.training.train(
        train_op, directory, hooks=[tf.compat.v1.train.StopAtStepHook(num_steps=5)],
        save_checkpoint_secs=None, save_summaries_steps=None)


def test_slims_training_loop_trains_as_tf1(tmp_path):
  tf1 = _train(tf.Graph, str(tmp_path / 'tf1'))
  assert _train(tfmon.Graph, str(tmp_path / 'tfmon')) == tf1


def test_slims_learning_train_saves_from_its_supervisors_thread_and_at_the_end(tmp_path):
  # The Supervisor's timer thread runs eagerly in TF2: its Saver.save took the
  # eager path, and the final save in the main thread then wrote nothing.
  # (TF1's own graph mode in TF 2.21 fails here: 'global_step:0 is out of scope'.)
  directory = str(tmp_path)
  with tfmon.Graph().as_default():
    x = tf.constant(np.ones([8, 3], np.float32))
    weights = tf.compat.v1.get_variable('w', [3, 1])
    tf.compat.v1.losses.add_loss(tf.reduce_mean((tf.matmul(x, weights) - 1.0) ** 2))
    train_op = slim.learning.create_train_op(
        tf.compat.v1.losses.get_total_loss(), tf.compat.v1.train.GradientDescentOptimizer(0.1))
    final_loss = slim.learning.train(train_op, directory, number_of_steps=30,
                                     save_interval_secs=600, save_summaries_secs=600)
  assert final_loss < 1e-3
  state = tf.train.get_checkpoint_state(directory)
  assert [p.rsplit('-', 1)[-1] for p in state.all_model_checkpoint_paths] == ['0', '30']
  np.testing.assert_allclose(tf.train.load_variable(directory, 'w'), weights.numpy())
