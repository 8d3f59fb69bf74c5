"""Scaffold and the session creators."""

import pytest
import tensorflow as tf

import tfmon


def test_init_op_and_init_fn_run_once_local_init_on_every_creation():
  weight = tf.Variable(0.0)
  calls = []

  def init_op(value):
    weight.assign(value)

  scaffold = tfmon.train.Scaffold(
      init_op=tfmon.train.op(init_op), init_feed_dict={'value': 5.0},
      init_fn=lambda scaffold, session: calls.append(('init_fn', session.run(weight))),
      local_init_op=lambda: weight.assign_add(1.0),
      local_init_fn=lambda scaffold, session: calls.append('local_init_fn'))
  creator = tfmon.train.ChiefSessionCreator(scaffold=scaffold)
  creator.create_session()
  assert calls == [('init_fn', 5.0), 'local_init_fn']
  assert weight.numpy() == 6.0
  creator.create_session()
  assert calls == [('init_fn', 5.0), 'local_init_fn', 'local_init_fn']
  assert weight.numpy() == 7.0


def test_worker_session_creator_runs_only_local_init():
  calls = []
  scaffold = tfmon.train.Scaffold(
      init_fn=lambda scaffold, session: calls.append('init_fn'),
      local_init_fn=lambda scaffold, session: calls.append('local_init_fn'))
  with tfmon.train.MonitoredSession(
      session_creator=tfmon.train.WorkerSessionCreator(scaffold=scaffold)):
    pass
  assert calls == ['local_init_fn']


def test_copy_from_scaffold_fills_missing_pieces():
  calls = []
  base = tfmon.train.Scaffold(init_fn=lambda scaffold, session: calls.append('base'))
  copy = tfmon.train.Scaffold(copy_from_scaffold=base,
                              local_init_fn=lambda s, session: calls.append('local'))
  tfmon.train.ChiefSessionCreator(scaffold=copy).create_session()
  assert calls == ['base', 'local']


def test_bad_scaffold_arguments():
  with pytest.raises(ValueError, match='ready_op=.* cannot be used: eager variables'):
    tfmon.train.Scaffold(ready_op=tf.constant([], tf.string))
  with pytest.raises(TypeError, match='init_fn must be a callable'):
    tfmon.train.Scaffold(init_fn='init')
  with pytest.raises(TypeError, match='copy_from_scaffold is not a Scaffold instance'):
    tfmon.train.Scaffold(copy_from_scaffold=object())
  with pytest.raises(TypeError, match="TensorFlow's tf.compat.v1.train.Scaffold; a tfmon "
                     'session takes tfmon.train.Scaffold, with the same arguments'):
    tfmon.train.ChiefSessionCreator(scaffold=tf.compat.v1.train.Scaffold())
  with pytest.raises(TypeError, match='scaffold must be a tfmon.train.Scaffold; got 1'):
    tfmon.train.ChiefSessionCreator(scaffold=1)


def test_singular_monitored_session_exposes_its_raw_session():
  hook_sessions = []

  class Hook(tfmon.train.SessionRunHook):

    def after_create_session(self, session, coord):
      hook_sessions.append(session)

  with tfmon.train.SingularMonitoredSession(hooks=[Hook()]) as sess:
    raw = sess.raw_session()
    assert raw is hook_sessions[0]
    assert raw.run(lambda: tf.constant(4)) == 4
