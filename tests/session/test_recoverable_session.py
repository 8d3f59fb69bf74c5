"""Recovery: a preempted run re-creates the session and is retried."""

import logging

import pytest
import tensorflow as tf

import tfmon


class PreemptOnce(tfmon.train.SessionRunHook):
  """Raises `error` in the after_run of run number `at_run`, once."""

  def __init__(self, error, at_run=2):
    self._error = error
    self._at_run = at_run
    self.runs = 0
    self.sessions = []

  def after_create_session(self, session, coord):
    self.sessions.append(session)

  def after_run(self, run_context, run_values):
    self.runs += 1
    if self.runs == self._at_run:
      raise self._error


@pytest.mark.parametrize('error', [
    tf.errors.AbortedError(None, None, 'worker preempted'),
    tf.errors.UnavailableError(None, None, 'parameter server gone'),
])
def test_preemption_recreates_the_session_and_retries_the_run(error, caplog):
  counter = tf.Variable(0)
  init_runs, local_init_runs = [], []
  scaffold = tfmon.train.Scaffold(
      init_fn=lambda scaffold, session: init_runs.append(session),
      local_init_fn=lambda scaffold, session: local_init_runs.append(session))
  hook = PreemptOnce(error)

  def step():
    counter.assign_add(1)
    return counter.read_value()

  caplog.set_level(logging.INFO)
  with tfmon.train.MonitoredSession(
      session_creator=tfmon.train.ChiefSessionCreator(scaffold=scaffold),
      hooks=[hook]) as sess:
    assert sess.run(step) == 1
    assert sess.run(step) == 3  # the preempted run 2 is retried as run 3
  assert len(hook.sessions) == 2 and hook.sessions[0] is not hook.sessions[1]
  assert len(init_runs) == 1  # eager variables keep their values: no re-init
  assert local_init_runs == hook.sessions
  assert 'This may be due to a preemption' in caplog.text
  assert str(error.message) in caplog.text


def test_step_preempted_while_tracing_is_retried():
  attempts = []

  def step():
    attempts.append(1)
    if len(attempts) == 1:
      raise tf.errors.AbortedError(None, None, 'preempted during trace')
    return tf.constant(7)

  with tfmon.train.MonitoredSession() as sess:
    assert sess.run(step) == 7
  assert len(attempts) == 2


def test_singular_monitored_session_does_not_recover():
  hook = PreemptOnce(tf.errors.AbortedError(None, None, 'preempted'), at_run=1)
  with pytest.raises(tf.errors.AbortedError, match='preempted'):
    with tfmon.train.SingularMonitoredSession(hooks=[hook]) as sess:
      sess.run(lambda: tf.constant(1))
  assert len(hook.sessions) == 1


def test_other_errors_propagate_without_recovery():
  hook = PreemptOnce(tf.errors.InvalidArgumentError(None, None, 'bad input'), at_run=1)
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match='bad input'):
      sess.run(lambda: tf.constant(1))
    assert sess.run(lambda: tf.constant(2)) == 2  # still usable
  assert len(hook.sessions) == 1


def test_recovery_restores_the_latest_checkpoint(tmp_path):
  global_step = tfmon.train.get_or_create_global_step()
  weight = tf.Variable(1.0)

  def step():
    weight.assign_add(1.0)
    global_step.assign_add(1)
    return weight.read_value()

  hook = PreemptOnce(tf.errors.AbortedError(None, None, 'preempted'), at_run=3)
  saver = tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=2,
                                          saver={'weight': weight})
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint={'weight': weight},
      save_checkpoint_secs=None, log_step_count_steps=None,
      save_summaries_steps=None, hooks=[saver, hook]) as sess:
    assert [sess.run(step) for _ in range(2)] == [2.0, 3.0]
    # Run 3 trains to 4.0 and is preempted: recovery restores step 2 (3.0).
    assert sess.run(step) == 4.0
  assert global_step.numpy() == 3
  assert len(hook.sessions) == 2
