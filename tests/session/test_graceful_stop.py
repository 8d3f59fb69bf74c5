"""Graceful stop on SIGTERM and SIGINT: real signals, in this process and in jobs
run as processes (tests/session/graceful_stop_job.py)."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

import tfmon
from tfmon.session import graceful_stop
from tests.training import Job

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SignalAtRun(tfmon.train.SessionRunHook):
  """Sends `signum` to this process after run number `at_run`."""

  def __init__(self, at_run, signum=signal.SIGTERM, times=1):
    self.at_run, self.signum, self.times = at_run, signum, times
    self.runs = 0
    self.ended = False

  def after_run(self, run_context, run_values):
    self.runs += 1
    if self.runs == self.at_run:
      for _ in range(self.times):
        signal.raise_signal(self.signum)

  def end(self, session):
    self.ended = True


def _train(job, tmp_path, hooks, **kwargs):
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint=job.checkpoint,
      save_checkpoint_steps=1000, save_summaries_steps=None,
      log_step_count_steps=None, hooks=hooks, **kwargs) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step_without_summaries))


@pytest.mark.parametrize('signum, code', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_finishes_the_step_saves_runs_end_and_exits(tmp_path, caplog, signum,
                                                            code):
  job = Job()
  hook = SignalAtRun(at_run=3, signum=signum)
  previous = signal.getsignal(signum)
  with pytest.raises(SystemExit) as exit_info:
    _train(job, tmp_path, [hook, tfmon.train.StopAtStepHook(last_step=100)])
  assert exit_info.value.code == code
  assert hook.runs == 3 and hook.ended
  assert job.global_step.numpy() == 3
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-3')
  assert signal.getsignal(signum) is previous  # restored on close
  assert f'Received {signum.name}: stopping after the step in flight' in caplog.text
  assert (f'Stopped on {signum.name} at global step 3: the hooks\' end ran; the '
          f'latest checkpoint is {tmp_path}/model.ckpt-3. Exiting with code {code}'
          in caplog.text)


def test_a_second_signal_is_ignored_while_stopping_and_a_third_escapes(tmp_path,
                                                                        caplog):
  job = Job()
  hook = SignalAtRun(at_run=2, times=2)
  with pytest.raises(SystemExit):
    _train(job, tmp_path, [hook])
  assert 'Received SIGTERM again: ignored' in caplog.text
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-2')
  # A third signal hands the signal to the handler there was before.
  received = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
  try:
    with pytest.raises(SystemExit):
      _train(Job(), tmp_path / 'again', [SignalAtRun(at_run=1, times=3)])
    assert received == [signal.SIGTERM]
    assert 'Received SIGTERM a third time' in caplog.text
  finally:
    signal.signal(signal.SIGTERM, previous)


def test_run_after_the_signal_closes_the_session_and_exits(tmp_path):
  # A loop that does not ask should_stop() still stops at the step boundary.
  job = Job()
  hook = SignalAtRun(at_run=2)
  with pytest.raises(SystemExit) as exit_info:
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), checkpoint=job.checkpoint,
        save_summaries_steps=None, log_step_count_steps=None, hooks=[hook]) as sess:
      for _ in range(10):
        sess.run(tfmon.train.op(job.step_without_summaries))
  assert exit_info.value.code == 143
  assert hook.ended and job.global_step.numpy() == 2
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-2')


def test_a_fused_run_ends_at_the_step_the_signal_arrived_in(tmp_path):
  # The step function signals its own process from inside the fused loop.
  job = Job()

  def signal_at_step_5(step):
    if int(step) == 5:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.5)  # a step long enough for the watcher thread, on a busy box

  def step():
    tf.py_function(signal_at_step_5, [job.global_step + 1], [])
    return job.step_without_summaries()

  with pytest.raises(SystemExit):
    with tfmon.train.MonitoredSession(
        hooks=[tfmon.train.StopAtStepHook(last_step=1000)],
        steps_per_loop=500) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(step))
  # The 500-step loop ended after the step in flight.
  assert job.global_step.numpy() == 5


def test_opting_out_leaves_the_handlers_alone(tmp_path):
  previous = signal.getsignal(signal.SIGTERM)
  for kwargs in ({'graceful_stop_signals': None}, {'graceful_stop_signals': ()}):
    Job()
    with tfmon.train.MonitoredSession(**kwargs) as sess:
      assert signal.getsignal(signal.SIGTERM) is previous
      assert not sess.should_stop()


def test_a_session_installs_handlers_and_restores_them_on_close():
  previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
  sess = tfmon.train.MonitoredSession()
  assert signal.getsignal(signal.SIGTERM) is not previous[signal.SIGTERM]
  sess.close()
  assert {s: signal.getsignal(s) for s in previous} == previous
  custom = tfmon.train.MonitoredSession(graceful_stop_signals=[signal.SIGUSR1])
  assert signal.getsignal(signal.SIGTERM) is previous[signal.SIGTERM]
  assert signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL
  custom.close()
  assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_a_session_dropped_without_close_gives_the_signal_back():
  received = []
  previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(1))
  try:
    sess = tfmon.train.MonitoredSession(graceful_stop_signals=[signal.SIGUSR1])
    del sess
    signal.raise_signal(signal.SIGUSR1)
    assert received == [1]
  finally:
    signal.signal(signal.SIGUSR1, previous)


def test_a_failed_construction_restores_the_handlers():
  previous = signal.getsignal(signal.SIGTERM)

  class FailingBegin(tfmon.train.SessionRunHook):

    def begin(self):
      raise ValueError('begin failed')

  with pytest.raises(ValueError, match='begin failed'):
    tfmon.train.MonitoredSession(hooks=[FailingBegin()])
  assert signal.getsignal(signal.SIGTERM) is previous


def test_a_session_in_another_thread_says_how_to_stop_it(caplog, monkeypatch):
  monkeypatch.setattr(graceful_stop, '_thread_warning_logged', False)
  result = {}

  def create():
    sess = tfmon.train.MonitoredSession()
    result['sess'] = sess

  thread = threading.Thread(target=create, name='trainer')
  thread.start()
  thread.join()
  assert "created in thread 'trainer'" in caplog.text
  assert 'session.request_graceful_stop(signum)' in caplog.text
  # request_graceful_stop (from a handler of the main thread) stops it.
  sess = result['sess']
  sess.request_graceful_stop(signal.SIGTERM)
  assert sess.should_stop()
  with pytest.raises(SystemExit) as exit_info:
    sess.close()
  assert exit_info.value.code == 143


@pytest.mark.parametrize('value, error, message', [
    (signal.SIGTERM, TypeError, 'graceful_stop_signals=<Signals.SIGTERM: 15>'),
    ('SIGTERM', TypeError, "graceful_stop_signals='SIGTERM'"),
    (['SIGTERM'], TypeError, "holds 'SIGTERM' of type str"),
    ([True], TypeError, 'holds True of type bool'),
    ([10**6], ValueError, 'holds 1000000, which is not a signal number'),
    ([signal.SIGKILL], ValueError, 'holds SIGKILL, which no process can handle'),
])
def test_bad_graceful_stop_signals_fail_at_construction(value, error, message):
  previous = signal.getsignal(signal.SIGTERM)
  with pytest.raises(error, match=message.replace('(', r'\(').replace('[', r'\[')):
    tfmon.train.MonitoredSession(graceful_stop_signals=value)
  with pytest.raises(error, match=message.replace('(', r'\(').replace('[', r'\[')):
    tfmon.train.MonitoredTrainingSession(graceful_stop_signals=value)
  assert signal.getsignal(signal.SIGTERM) is previous


def _job(tmp_path, *args, timeout=90):
  """Runs graceful_stop_job as a process; returns (exit code, stdout, stderr)."""
  process = subprocess.run(
      [sys.executable, '-m', 'tests.session.graceful_stop_job', str(tmp_path),
       *map(str, args)], cwd=_ROOT, capture_output=True, text=True,
      timeout=timeout)
  return process.returncode, process.stdout, process.stderr


@pytest.mark.slow
def test_a_process_stopped_by_sigterm_exits_143_and_its_restart_resumes(tmp_path):
  # A fused run of up to 100 steps: SIGTERM arrives from inside step 7.
  code, out, err = _job(tmp_path, 1000, 100, '--signal-at-step', 7,
                        '--step-secs', 0.02, '--signal-again-while-saving')
  assert code == 143, err
  assert 'STEP 7' in out.splitlines() and 'SENT AGAIN' in out
  assert 'Received SIGTERM again: ignored' in err
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-7')
  code, out, err = _job(tmp_path, 12, 100)
  assert code == 0, err
  assert out.splitlines()[0] == 'START 7'
  assert out.splitlines()[-1] == 'DONE 12 12.0'  # nothing lost, nothing repeated
