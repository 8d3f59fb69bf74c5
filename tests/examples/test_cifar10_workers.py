"""Multi-worker training on local processes: the launcher, and the main job on it.

The launcher's tests run tiny Python workers (no TensorFlow), so they take
seconds; the end-to-end tests train the CIFAR-10 job on 2 workers, twice (a
run and its resumption), and once until Ctrl-C stops it.
"""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import tensorflow as tf

from tests import event_files
from tfmon.examples import launch

pytestmark = pytest.mark.slow  # worker processes: run by .ci/run, left out by -m "not slow"

_LAUNCH_PY = launch.__file__  # run as a script, it imports neither tfmon nor TF


def _worker(body):
  """A worker command running `body`, with `index` and `config` (its TF_CONFIG)."""
  prologue = ('import json, os, signal, sys, time\n'
              'config = json.loads(os.environ["TF_CONFIG"])\n'
              'index = config["task"]["index"]\n')
  return [sys.executable, '-c', prologue + textwrap.dedent(body)]


def test_each_worker_gets_its_tf_config_and_its_output_is_prefixed(capfd):
  code = launch.launch(_worker('''
      print(json.dumps(config))
      print(f'worker {index} on stderr', file=sys.stderr)
      '''), workers=3)
  assert code == 0
  out, err = capfd.readouterr()
  configs = {}
  for line in out.splitlines():
    match = re.fullmatch(r'\[worker (\d)\] (\{.*\})', line)
    assert match, out
    configs[int(match.group(1))] = json.loads(match.group(2))
  assert sorted(configs) == [0, 1, 2]
  cluster = configs[0]['cluster']
  assert list(cluster) == ['worker'] and len(set(cluster['worker'])) == 3
  assert all(re.fullmatch(r'localhost:\d+', address) for address in cluster['worker'])
  for index, config in configs.items():
    assert config == {'cluster': cluster, 'task': {'type': 'worker', 'index': index}}
  for index in range(3):
    assert f'[worker {index}] worker {index} on stderr\n' in err


def test_exit_code_is_the_first_failed_worker_s_and_a_signal_death_is_128_plus(capfd):
  assert launch.launch(_worker('sys.exit({0: 0, 1: 3, 2: 4}[index])'), workers=3) == 3
  assert 'worker 1 exited with 3, worker 2 exited with 4' in capfd.readouterr().err
  assert launch.launch(_worker('''
      if index == 1:
        os.kill(os.getpid(), signal.SIGTERM)
      '''), workers=2) == 128 + signal.SIGTERM
  assert launch.launch(_worker('pass'), workers=1) == 0


def test_a_failed_worker_gets_the_others_killed_after_the_grace_time(tmp_path, capfd):
  pid_file = tmp_path / 'sleeper.pid'
  start = time.monotonic()
  code = launch.launch(_worker(f'''
      if index == 1:
        sys.exit(2)
      with open({str(pid_file)!r}, 'w') as f:
        f.write(str(os.getpid()))
      time.sleep(120)
      '''), workers=2, grace_secs=1.0)
  assert code == 2  # the failed worker's, not the killed one's
  assert time.monotonic() - start < 30
  assert 'killing worker(s) [0], still running 1 s after a worker failed' in (
      capfd.readouterr().err)
  with pytest.raises(ProcessLookupError):  # killed and reaped
    os.kill(int(pid_file.read_text()), 0)


def _wait_for_files(paths, timeout_secs=30):
  deadline = time.monotonic() + timeout_secs
  while not all(os.path.exists(path) for path in paths):
    assert time.monotonic() < deadline, f'workers did not start: {paths}'
    time.sleep(0.05)


def test_sigterm_to_the_launcher_reaches_every_worker_once(tmp_path):
  ready = [tmp_path / f'ready_{i}' for i in range(2)]
  launcher = subprocess.Popen(  # in a process group of its own, as a terminal's job
      [sys.executable, _LAUNCH_PY, '--workers', '2', '--'] + _worker(f'''
          signals = []
          def stop(signum, frame):
            signals.append(signum)
          signal.signal(signal.SIGTERM, stop)
          open(os.path.join({str(tmp_path)!r}, f'ready_{{index}}'), 'w').close()
          deadline = time.time() + 60
          while not signals and time.time() < deadline:
            time.sleep(0.05)
          time.sleep(0.5)  # a second delivery would arrive by now
          print(f'signals {{signals}}')
          sys.exit(10 + index)
          '''),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True)
  try:
    _wait_for_files(ready)
    # To the whole group, as a terminal's Ctrl-C: the workers, in groups of
    # their own, get the signal from the launcher only.
    os.killpg(launcher.pid, signal.SIGTERM)
    out, err = launcher.communicate(timeout=30)
  finally:
    launcher.kill()
  assert launcher.returncode == 10, err
  for index in range(2):
    assert f'[worker {index}] signals [{int(signal.SIGTERM)}]' in out


def test_workers_that_cannot_stop_are_killed_grace_secs_after_a_signal(tmp_path):
  # As a worker waiting in a collective op for one that has left: it ignores
  # the forwarded SIGTERM.
  ready = [tmp_path / f'ready_{i}' for i in range(2)]
  launcher = subprocess.Popen(
      [sys.executable, _LAUNCH_PY, '--workers', '2', '--grace_secs', '1', '--'] + _worker(f'''
          signal.signal(signal.SIGTERM, signal.SIG_IGN)
          open(os.path.join({str(tmp_path)!r}, f'ready_{{index}}'), 'w').close()
          time.sleep(60)
          '''),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
  try:
    _wait_for_files(ready)
    started = time.monotonic()
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=30)
  finally:
    launcher.kill()
  assert time.monotonic() - started < 10
  assert launcher.returncode == 128 + signal.SIGTERM, err
  assert 'killing worker(s) [0, 1], still running 1 s after SIGTERM was forwarded' in err


def test_no_worker_outlives_a_killed_launcher(tmp_path):
  launcher = subprocess.Popen(
      [sys.executable, _LAUNCH_PY, '--workers', '2', '--'] + _worker(f'''
          with open(os.path.join({str(tmp_path)!r}, f'pid_{{index}}'), 'w') as f:
            f.write(str(os.getpid()))
          time.sleep(120)
          '''),
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    pid_files = [tmp_path / f'pid_{i}' for i in range(2)]
    _wait_for_files(pid_files)
    time.sleep(0.2)  # the pid is written: the file is complete
  finally:
    launcher.kill()
    launcher.wait()
  for pid_file in pid_files:
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid):
      assert time.monotonic() < deadline, f'worker {pid} outlived the launcher'
      time.sleep(0.05)


def _alive(pid):
  """Whether `pid` runs (an orphan is reaped by init; a zombie counts as dead)."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


def test_bad_input_fails_early_naming_the_value(capsys):
  with pytest.raises(ValueError, match=r'workers=0: give the number of worker '
                     r'processes, an int >= 1'):
    launch.launch(['true'], workers=0)
  with pytest.raises(ValueError, match='command is empty'):
    launch.launch([], workers=2)
  with pytest.raises(TypeError, match="command='python train.py' must be a list"):
    launch.launch('python train.py', workers=2)
  with pytest.raises(ValueError, match=r'grace_secs=-1'):
    launch.launch(['true'], workers=2, grace_secs=-1)
  for argv, message in (
      (['--workers', '0', '--', 'true'], '--workers 0: give at least 1 worker process'),
      (['--workers', '2'], 'no command: give the program each worker runs after --'),
      (['--', 'true'], 'the following arguments are required: --workers')):
    with pytest.raises(SystemExit) as exit_info:
      launch.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
  assert launch.main(['--workers', '2', '--', 'no-such-program-tfmon']) == 127
  assert "cannot run 'no-such-program-tfmon'" in capsys.readouterr().err


def test_cifar10_refuses_bad_workers_flags_before_launching(tmp_path):
  cases = {('--workers=0',): 'flag --workers=0: 0 is not a positive integer',
           ('--workers=2', '--batch_size=33'): '--batch_size is the global batch, '
                                               'split evenly over --workers'}
  processes = {flags: subprocess.Popen(  # at once: each start imports TensorFlow
      [sys.executable, '-m', 'tfmon.examples.cifar10', *flags,
       f'--train_dir={tmp_path}'],
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for flags in cases}
  for flags, expected in cases.items():
    _, stderr = processes[flags].communicate(timeout=120)
    assert processes[flags].returncode != 0
    assert expected in stderr, stderr
    assert 'Traceback' not in stderr and '[worker' not in stderr, stderr


class _Run:
  """A run of the main job's command line: exit code, and each output line with
  the seconds since start at which it came."""

  def __init__(self, code, lines, seconds):
    self.code = code
    self.lines = lines  # [(seconds, line)], stdout and stderr interleaved
    self.seconds = seconds  # at the launcher's exit
    self.log = '\n'.join(line for _, line in lines)


def _run_cifar10(args, env=None, interrupt_on=None, timeout_secs=150):
  """Runs `python -m tfmon.examples.cifar10 args` in a process group of its own,
  as a terminal runs a job; sends the group SIGINT (Ctrl-C) once every worker
  has printed a line holding `interrupt_on`."""
  env = dict(os.environ if env is None else env, TF_CPP_MIN_LOG_LEVEL='2')  # errors show
  process = subprocess.Popen(
      [sys.executable, '-m', 'tfmon.examples.cifar10', *map(str, args)], env=env,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
  start = time.monotonic()
  lines = []
  waiting = {f'[worker {i}] ' for i in range(2)}

  def read(pipe):
    for line in pipe:
      lines.append((time.monotonic() - start, line.rstrip('\n')))
      if interrupt_on and waiting and interrupt_on in line:
        waiting.discard(line[:len('[worker 0] ')])
        if not waiting:
          os.killpg(process.pid, signal.SIGINT)

  readers = [threading.Thread(target=read, args=(pipe,), daemon=True)
             for pipe in (process.stdout, process.stderr)]
  for reader in readers:
    reader.start()
  try:
    code = process.wait(timeout=timeout_secs)
  finally:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
      process.wait()
  seconds = time.monotonic() - start
  for reader in readers:
    reader.join(5)
  run = _Run(code, sorted(lines), seconds)
  if code and 'does not support yet' in run.log:
    pytest.skip('tfmon refuses multi-worker strategies until the multi-worker '
                'session core lands (MonitoredSession: "does not support yet").')
  return run


def _assert_ended_cleanly(run, last_line, within_secs):
  """No error from TensorFlow's coordination of the workers, TensorFlow's
  lines once each, and the job gone `within_secs` after `last_line`."""
  for error in ('StartAbort', 'have crashed', 'Failed to send RPC', 'Traceback'):
    assert error not in run.log, run.log[-5000:]
  for index in range(2):
    strategy_lines = re.findall(
        rf'\[worker {index}\] .*Using MirroredStrategy with devices', run.log)
    assert len(strategy_lines) == 1, run.log[-5000:]
  last = max(seconds for seconds, line in run.lines if last_line in line)
  assert run.seconds - last < within_secs, run.log[-3000:]


_SMALL = ['--eval_every', '10', '--eval_examples', '64', '--log_frequency', '10',
          '--batch_size', '32']


def test_trains_on_two_workers_in_their_own_directory_resumes_and_ends_cleanly(
    tmp_path):
  env = dict(os.environ, TMPDIR=str(tmp_path))  # where the default directories go
  train_dir = tmp_path / 'cifar10_train_workers'  # not the single-process job's
  run = _run_cifar10(['--workers', '2', '--max_steps', '20', *_SMALL], env)
  assert run.code == 0, run.log[-5000:]
  assert tf.train.latest_checkpoint(train_dir).endswith('model.ckpt-20')
  assert not os.path.exists(tmp_path / 'cifar10_train')
  assert not glob.glob(os.path.join(train_dir, 'workertemp_*')), os.listdir(train_dir)
  for index in range(2):
    assert re.search(rf'\[worker {index}\] .*Trained 20 steps \(global step 0 -> 20\)',
                     run.log), run.log
  evaluations = _evaluations(run.log, 20)  # same weights, each evaluating on its own
  assert sorted(evaluations) == ['0', '1'] and len(set(evaluations.values())) == 1
  assert event_files.scalars(event_files.events(train_dir / 'eval'), 'accuracy')[0] == [
      10, 20]  # the chief's evaluation event files, flushed before it exited
  _assert_ended_cleanly(run, 'Trained 20 steps', within_secs=15.0)

  run = _run_cifar10(['--workers', '2', '--max_steps', '30', *_SMALL], env)
  assert run.code == 0, run.log[-5000:]
  assert tf.train.latest_checkpoint(train_dir).endswith('model.ckpt-30')
  for index in range(2):
    assert re.search(rf'\[worker {index}\] .*Resuming from global step 20 ',
                     run.log), run.log
    assert re.search(rf'\[worker {index}\] .*Trained 10 steps \(global step 20 -> 30\)',
                     run.log), run.log
  assert f'Restoring parameters from {train_dir}/model.ckpt-20' in run.log
  _assert_ended_cleanly(run, 'Trained 10 steps', within_secs=15.0)


def test_ctrl_c_stops_every_worker_at_the_same_step_and_ends_at_once(tmp_path):
  run = _run_cifar10(['--workers', '2', '--max_steps', '100000', '--train_dir',
                      tmp_path, *_SMALL], interrupt_on='step 10, loss')
  assert run.code == 128 + signal.SIGINT, run.log[-5000:]
  stopped = dict(re.findall(r'\[worker (\d)\] .*Stopped on SIGINT at global step (\d+)',
                            run.log))
  assert sorted(stopped) == ['0', '1'] and len(set(stopped.values())) == 1, run.log
  assert tf.train.latest_checkpoint(tmp_path).endswith(f'model.ckpt-{stopped["0"]}')
  _assert_ended_cleanly(run, 'Stopped on SIGINT', within_secs=15.0)
  # The workers themselves, without the launcher's own exit.
  last_stop = max(seconds for seconds, line in run.lines if 'Stopped on SIGINT' in line)
  exited = [seconds for seconds, line in run.lines
            if 'launch: worker 0 exited with 130, worker 1 exited with 130.' in line]
  assert exited and exited[0] - last_stop < 10.0, run.log[-3000:]  # was 22 s


def _evaluations(log, step):
  """Each worker's logged evaluation results at `step`."""
  return dict(re.findall(rf'\[worker (\d)\] .*Saving dict for global step {step}: '
                         r'(.*)', log))
