"""TF's own sessions on a captured graph: `tf.compat.v1.Session`, `Supervisor`
and TF's `MonitoredTrainingSession` run a `tfmon.Graph` as they run TF1's graph,
checked against TF1's own graph mode running the same code."""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfmon


def _regression(with_input=False):
  """A seeded linear regression: (loss, train_op, feeds-or-None)."""
  tf.compat.v1.set_random_seed(7)
  if with_input:
    dataset = tf.data.Dataset.from_tensor_slices(
        (np.ones([40, 3], np.float32), np.ones([40, 1], np.float32))).batch(4)
    x, y = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    feeds = None
  else:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name='x')
    y = tf.compat.v1.placeholder(tf.float32, [None, 1], name='y')
    feeds = {x: np.ones([4, 3], np.float32), y: np.ones([4, 1], np.float32)}
  weights = tf.compat.v1.get_variable('dense/kernel', [3, 1])
  bias = tf.compat.v1.get_variable('dense/bias', [1], initializer=tf.compat.v1.zeros_initializer())
  loss = tf.reduce_mean((tf.matmul(x, weights) + bias - y) ** 2, name='loss')
  tf.compat.v1.summary.scalar('loss', loss)
  global_step = tf.compat.v1.train.get_or_create_global_step()
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=global_step)
  return loss, train_op, feeds


def _plain_session_loop(graph_class, directory):
  """The most common TF1 loop: Session, init op, feed_dict, Saver save/restore."""
  with graph_class().as_default():
    loss, train_op, feeds = _regression()
    init = tf.compat.v1.global_variables_initializer()
    saver = tf.compat.v1.train.Saver()
    losses = []
    with tf.compat.v1.Session() as sess:
      assert tf.compat.v1.get_default_session() is sess
      sess.run(init)
      for _ in range(4):
        _, value = sess.run([train_op, loss], feed_dict=feeds)
        losses.append(value)
      path = saver.save(sess, os.path.join(directory, 'model.ckpt'),
                        global_step=tf.compat.v1.train.get_global_step())
      evaluated = loss.eval(feed_dict=feeds)  # the default session's
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, path)
      restored = sess.run(tf.compat.v1.train.get_global_step())
  return losses, evaluated, os.path.basename(path), restored


def test_a_plain_session_loop_runs_as_in_tf1(tmp_path):
  tf1 = _plain_session_loop(tf.Graph, str(tmp_path / 'tf1'))
  ours = _plain_session_loop(tfmon.Graph, str(tmp_path / 'tfmon'))
  np.testing.assert_allclose(ours[0], tf1[0], rtol=1e-6)
  assert ours[1:] == pytest.approx(tf1[1:], rel=1e-6)
  assert ours[2] == 'model.ckpt-4' and ours[3] == 4
  # The checkpoint is TF1's Saver's: read by name.
  assert sorted(name for name, _ in tf.train.list_variables(str(tmp_path / 'tfmon'))) == [
      'dense/bias', 'dense/kernel', 'global_step']


def _tf_monitored_training_session(graph_class, directory, last_step):
  with graph_class().as_default():
    loss, train_op, _ = _regression(with_input=True)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=last_step)]
    losses = []
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=directory, hooks=hooks, save_checkpoint_steps=3,
        save_summaries_steps=2) as sess:
      while not sess.should_stop():
        losses.append(sess.run([train_op, loss])[1])
  return losses


def test_tfs_own_monitored_training_session_trains_saves_and_resumes_as_in_tf1(tmp_path):
  for graph_class, name in ((tf.Graph, 'tf1'), (tfmon.Graph, 'tfmon')):
    directory = str(tmp_path / name)
    first = _tf_monitored_training_session(graph_class, directory, 6)
    again = _tf_monitored_training_session(graph_class, directory, 9)
    state = tf.train.get_checkpoint_state(directory)
    if name == 'tf1':
      expected = first, again, [os.path.basename(p) for p in state.all_model_checkpoint_paths]
      continue
    np.testing.assert_allclose(first, expected[0], rtol=1e-6)
    np.testing.assert_allclose(again, expected[1], rtol=1e-6)  # resumed from step 6
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == expected[2]
    assert len(again) == 3
    assert os.path.exists(state.model_checkpoint_path + '.meta')


def _supervisor(graph_class, directory):
  results = []
  for _ in range(2):
    with graph_class().as_default():
      loss, train_op, feeds = _regression()
      global_step = tf.compat.v1.train.get_global_step()
      supervisor = tf.compat.v1.train.Supervisor(
          logdir=directory, global_step=global_step, save_model_secs=0,
          save_summaries_secs=0)
      with supervisor.managed_session() as sess:
        start = sess.run(global_step)
        for _ in range(3):
          _, value = sess.run([train_op, loss], feeds)
        supervisor.saver.save(sess, supervisor.save_path, global_step=global_step)
      results.append((start, value))
  return results


def test_a_supervisors_managed_session_initializes_restores_and_saves_as_in_tf1(tmp_path):
  tf1 = _supervisor(tf.Graph, str(tmp_path / 'tf1'))
  ours = _supervisor(tfmon.Graph, str(tmp_path / 'tfmon'))
  assert [start for start, _ in ours] == [0, 3]
  np.testing.assert_allclose([v for _, v in ours], [v for _, v in tf1], rtol=1e-6)


def test_tfs_session_of_another_graph_is_tfs_own():
  with tf.Graph().as_default():
    sess = tf.compat.v1.Session()
    assert type(sess) is tf.compat.v1.Session
    sess.close()
  with tfmon.Graph().as_default():
    sess = tf.compat.v1.Session()
    assert isinstance(sess, tfmon.train.Session)
    sess.close()


def test_a_remote_target_and_partial_runs_are_refused_with_the_fix():
  with tfmon.Graph().as_default():
    with pytest.raises(ValueError, match=r"target='grpc://localhost:2222'.*runs in this "
                       'process only.*MultiWorkerMirroredStrategy'):
      tf.compat.v1.Session('grpc://localhost:2222')
    x = tf.compat.v1.placeholder(tf.float32, [])
    with tf.compat.v1.Session() as sess:
      with pytest.raises(NotImplementedError, match='partial_run is not supported.*one '
                         'session.run'):
        sess.partial_run_setup([x * 2], [x])
      assert sess.make_callable(x * 2, [x])(3.0) == 6.0


def _named(name):
  [variable] = [v for v in tf.compat.v1.global_variables() if v.op.name == name]
  return variable


def test_tf1_continues_a_captured_graphs_checkpoints_by_name(tmp_path):
  directory = str(tmp_path)
  with tfmon.Graph().as_default():
    _, train_op, _ = _regression(with_input=True)
    parts = tf.compat.v1.get_variable(
        'emb', [6, 2], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=directory, save_summaries_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=3)]) as sess:
      while not sess.should_stop():
        sess.run(train_op)
    kernel_variable, part_variables = _named('dense/kernel'), list(parts)
  kernel = kernel_variable.numpy()
  whole = np.concatenate([part.numpy() for part in part_variables])
  # Keys are TF1 Saver's: every TF1-era reader finds them by name.
  np.testing.assert_array_equal(tf.train.load_variable(directory, 'dense/kernel'), kernel)
  np.testing.assert_array_equal(tf.train.load_variable(directory, 'emb'), whole)
  with tf.Graph().as_default():  # TF1's own MonitoredTrainingSession continues it
    _, train_op, _ = _regression(with_input=True)
    parts = tf.compat.v1.get_variable(
        'emb', [6, 2], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    global_step = tf.compat.v1.train.get_global_step()
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=directory, save_summaries_steps=None,
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=5)]) as sess:
      assert sess.run(global_step) == 3
      np.testing.assert_array_equal(
          sess.run(_named('dense/kernel')), kernel)
      np.testing.assert_array_equal(np.concatenate(sess.run(list(parts))), whole)
      while not sess.should_stop():
        sess.run(train_op)
  state = tf.train.get_checkpoint_state(directory)
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths][-2:] == [
      'model.ckpt-3', 'model.ckpt-5']


def test_import_meta_graph_users_restore_a_captured_graphs_checkpoint(tmp_path):
  # Each checkpoint has TF1 Saver's `.meta`: the graph with real variables and
  # a saver_def naming the checkpoint's keys; it goes when its checkpoint does.
  directory = str(tmp_path)
  with tfmon.Graph().as_default():
    loss, train_op, feeds = _regression()
    parts = tf.compat.v1.get_variable(
        'emb', [6, 2], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=directory, save_checkpoint_steps=1, save_summaries_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=8)]) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict=feeds)
    with tfmon.train.SingularMonitoredSession(checkpoint_dir=directory) as sess:
      expected = sess.run(loss, feed_dict=feeds)
      whole = np.concatenate(sess.run(list(parts)))
  kept = sorted(p for p in os.listdir(directory) if p.endswith('.meta'))
  assert kept == [f'model.ckpt-{step}.meta' for step in range(4, 9)]
  with tf.Graph().as_default():
    saver = tf.compat.v1.train.import_meta_graph(os.path.join(directory, 'model.ckpt-8.meta'))
    assert sorted(v.op.name for v in tf.compat.v1.trainable_variables()) == [
        'dense/bias', 'dense/kernel', 'emb/part_0', 'emb/part_1']
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, os.path.join(directory, 'model.ckpt-8'))
      assert sess.run(tf.compat.v1.train.get_global_step()) == 8
      value = sess.run('loss:0', feed_dict={'x:0': np.ones([4, 3], np.float32),
                                            'y:0': np.ones([4, 1], np.float32)})
      restored_whole = np.concatenate(sess.run(
          ['emb/part_0/Read/ReadVariableOp:0', 'emb/part_1/Read/ReadVariableOp:0']))
  assert value == pytest.approx(expected, rel=1e-6)
  np.testing.assert_array_equal(restored_whole, whole)


def test_continuing_a_tf1_directory_keeps_and_sweeps_its_checkpoints_as_tf1_did(tmp_path):
  # TF1's state file has no timestamps, for which CheckpointManager would drop
  # TF1's checkpoints from it (and never delete their files).
  directory = str(tmp_path)
  for graph_class, session_class, last_step in (
      (tf.Graph, tf.compat.v1.train.MonitoredTrainingSession, 4),
      (tfmon.Graph, tfmon.train.MonitoredTrainingSession, 10)):
    with graph_class().as_default():
      _, train_op, feeds = _regression()
      with session_class(checkpoint_dir=directory, save_checkpoint_steps=2,
                         save_summaries_steps=None,
                         hooks=[tf.compat.v1.train.StopAtStepHook(last_step=last_step)]) as sess:
        while not sess.should_stop():
          sess.run(train_op, feed_dict=feeds)
  state = tf.train.get_checkpoint_state(directory)
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      f'model.ckpt-{step}' for step in (2, 4, 6, 8, 10)]
  assert not [name for name in os.listdir(directory) if name.startswith('model.ckpt-0.')]


def test_between_graph_replication_is_refused_at_creation_with_the_fix():
  # TF1's parameter-server scripts place variables on '/job:ps': refused when
  # the session is made, not by a placement error in the first run.
  cluster = tf.train.ClusterSpec({'ps': ['localhost:2222'], 'worker': ['localhost:2223']})
  with tfmon.Graph().as_default():
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(cluster=cluster)):
      global_step = tf.compat.v1.train.get_or_create_global_step()
      train_op = tf.compat.v1.assign_add(global_step, 1)
    with pytest.raises(ValueError, match=r"placed on '/job:.*between-graph "
                       r"replication.*MultiWorkerMirroredStrategy.*TF1's own graph mode"):
      tfmon.train.MonitoredTrainingSession(is_chief=True)
    with pytest.raises(ValueError, match='between-graph replication'):
      tf.compat.v1.Session()
  del train_op
