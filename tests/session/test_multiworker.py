"""Multi-worker training on MultiWorkerMirroredStrategy: two local worker
processes (tests/session/multiworker_job.py) on localhost ports."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfmon
from tfmon.examples import launch

pytestmark = pytest.mark.slow  # worker processes: run by .ci/run, left out by -m "not slow"

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start(args, workers=2):
  processes = []
  for config in launch.tf_configs(launch.free_ports(workers)):
    processes.append(subprocess.Popen(
        [sys.executable, *args], cwd=_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env={**os.environ, 'TF_CONFIG': json.dumps(config),
             'TF_CPP_MIN_LOG_LEVEL': '2'}))
  return processes


def _finish(processes, timeout=60):
  """(exit code, output) per worker; kills all if one is still running."""
  outputs = []
  try:
    for process in processes:
      outputs.append((process.communicate(timeout=timeout)[0], process.returncode))
  finally:
    for process in processes:
      process.kill()
  return [(code, output) for output, code in outputs]


def _train(train_dir, **config):
  """Runs the job on 2 workers: per worker, (exit code, RESULT dict, output)."""
  config['train_dir'] = str(train_dir)
  finished = _finish(_start(['-m', 'tests.session.multiworker_job', json.dumps(config)]))
  runs = []
  for code, output in finished:
    lines = [l for l in output.splitlines() if l.startswith('RESULT:')]
    runs.append((code, json.loads(lines[-1][7:]) if lines else None, output))
  return runs


def _checkpoint_steps(train_dir):
  return sorted(int(name[len('model.ckpt-'):-len('.index')])
                for name in os.listdir(train_dir) if name.endswith('.index'))


def _no_worker_temp(train_dir):
  return not [name for name in os.listdir(train_dir) if name.startswith('workertemp')]


def test_two_workers_stop_at_the_same_step_with_a_chief_only_hook(tmp_path):
  (code0, chief, out0), (code1, worker, out1) = _train(tmp_path, last_step=50)
  assert (code0, code1) == (0, 0), out0[-3000:] + out1[-3000:]
  assert chief['step'] == worker['step'] == 50
  assert chief['weights'] == worker['weights']
  assert chief['weights'] != [0.0] * 4  # it trained
  # The chief-only hook ran on the chief only, on every run.
  assert (chief['chief_hook_runs'], worker['chief_hook_runs']) == (50, 0)
  assert 'loss = ' in out0 and 'loss = ' not in out1  # LoggingTensorHook, chief only
  # The chief's checkpoints; the other worker's temporary ones are gone.
  assert _checkpoint_steps(tmp_path) == [0, 20, 40, 50]
  assert _no_worker_temp(tmp_path)
  reader = tf.train.load_checkpoint(str(tmp_path / 'model.ckpt-50'))
  saved = reader.get_tensor('weights/.ATTRIBUTES/VARIABLE_VALUE').ravel().tolist()
  assert saved == pytest.approx(chief['weights'])
  # A sync-on-read variable is saved as its sum over the workers: 8 each a step.
  assert reader.get_tensor('examples/.ATTRIBUTES/VARIABLE_VALUE') == 2 * 8 * 50


def test_timed_saves_are_made_by_every_worker_at_the_same_step(tmp_path):
  # The workers' clocks differ; each save sums a sync-on-read variable over
  # them (a collective op), so a save made by one worker alone would fail.
  (code0, chief, out0), (code1, worker, out1) = _train(
      tmp_path, last_step=40, save_steps=None, save_secs=0.25, sleep=[1, 0.03])
  assert (code0, code1) == (0, 0), out0[-3000:] + out1[-3000:]
  assert chief['step'] == worker['step'] == 40
  steps = _checkpoint_steps(tmp_path)
  assert steps[-1] == 40 and len(steps) >= 3, steps  # max_to_keep=5
  assert _no_worker_temp(tmp_path)
  for step in steps:
    reader = tf.train.load_checkpoint(str(tmp_path / f'model.ckpt-{step}'))
    assert reader.get_tensor('examples/.ATTRIBUTES/VARIABLE_VALUE') == 16 * step


def test_both_resume_from_the_chiefs_checkpoint_and_fused_runs_end_the_same(tmp_path):
  resumed, fused = tmp_path / 'resumed', tmp_path / 'fused'
  first = _train(resumed, last_step=30)
  assert [run[0] for run in first] == [0, 0], first[0][2][-3000:] + first[1][2][-3000:]
  # The second run fuses up to 10 steps per run, but the chief's legacy hook
  # sees every step, so every worker runs one; only the chief has checkpoints.
  second = _train(resumed, last_step=50, steps_per_loop=10)
  assert [run[0] for run in second] == [0, 0], second[0][2][-3000:] + second[1][2][-3000:]
  assert [run[1]['start'] for run in second] == [30, 30]
  assert [run[1]['step'] for run in second] == [50, 50]
  # From scratch, every worker fusing: the same steps end with the same weights.
  whole = _train(fused, last_step=50, steps_per_loop=10, chief_fuses=True)
  assert [run[0] for run in whole] == [0, 0], whole[0][2][-3000:] + whole[1][2][-3000:]
  assert [run[1]['chief_hook_runs'] for run in second] == [20, 0]
  assert whole[0][1]['chief_hook_runs'] < 20  # fused: fewer runs than steps
  for run in second + whole:
    assert run[1]['weights'] == pytest.approx(second[0][1]['weights'], rel=1e-5)
  # v1 timer: the next save is 20 steps after the restored step 30.
  assert _checkpoint_steps(resumed) == [0, 20, 30, 50]
  assert _checkpoint_steps(fused) == [0, 20, 40, 50]
  assert _no_worker_temp(resumed) and _no_worker_temp(fused)


def test_a_nan_stop_on_one_worker_stops_both_after_the_same_step(tmp_path):
  # Worker 1 alone sees a NaN at step 20; NanTensorHook(fail_on_nan_loss=False).
  (code0, chief, out0), (code1, worker, out1) = _train(
      tmp_path, last_step=50, nan_at=[1, 20])
  assert (code0, code1) == (0, 0), out0[-3000:] + out1[-3000:]
  assert 'Model diverged with loss = NaN.' in out1
  assert 'Model diverged' not in out0
  assert chief['step'] == worker['step'] == 20
  assert chief['weights'] == worker['weights']
  assert _checkpoint_steps(tmp_path) == [0, 20]


def test_sigterm_to_one_worker_saves_a_checkpoint_both_resume_from(tmp_path):
  # Worker 1 receives SIGTERM after step 15.
  (code0, chief, out0), (code1, worker, out1) = _train(
      tmp_path, last_step=50, act_at=[1, 15, 'SIGTERM'])
  assert (code0, code1) == (143, 143), out0[-3000:] + out1[-3000:]
  assert chief['step'] == worker['step'] == 15
  assert 'Another worker received SIGTERM' in out0
  assert 'model.ckpt-15' in out0
  assert _checkpoint_steps(tmp_path) == [0, 15]
  assert _no_worker_temp(tmp_path)
  resumed = _train(tmp_path, last_step=25)
  assert [run[0] for run in resumed] == [0, 0], resumed[0][2][-3000:]
  assert [(run[1]['start'], run[1]['step']) for run in resumed] == [(15, 25)] * 2


@pytest.mark.parametrize('failure, worker_code', [
    # Worker 1 kills itself (SIGKILL) after step 15.
    ({'act_at': [1, 15, 'SIGKILL']}, -9),
    # Worker 1 raises NanLossDuringTrainingError at step 15.
    ({'nan_at': [1, 15], 'fail_on_nan': True}, 1),
])
def test_a_killed_or_failed_worker_ends_the_other_with_an_error_naming_it(
    tmp_path, failure, worker_code):
  # In a job that would not stop by itself.
  (code0, chief, out0), (code1, _, out1) = _train(tmp_path, last_step=10**6, **failure)
  assert code1 == worker_code, out1[-3000:]
  if worker_code == 1:
    assert 'NanLossDuringTrainingError: NaN loss during training.' in out1
  assert code0 == 1
  assert 'UnavailableError: Worker 0 lost worker 1 of its multi-worker strategy' in out0
  assert 'start every worker again: they resume from the latest checkpoint' in out0
  assert 15 <= chief['step'] <= 16


_REFUSED = """
import tensorflow as tf
import tfmon

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # from TF_CONFIG
index = strategy.cluster_resolver.task_id
try:  # the opposite of what TF_CONFIG says
  tfmon.train.MonitoredTrainingSession(is_chief=index != 0, strategy=strategy)
except ValueError as e:
  print('refused:', e)
try:
  tfmon.train.MonitoredTrainingSession(strategy=strategy)
except ValueError as e:
  print('refused:', e)
"""


def test_is_chief_against_tf_config_and_no_global_step_are_refused():
  outputs = _finish(_start(['-c', _REFUSED]))
  for index, (code, output) in enumerate(outputs):
    assert code == 0, output[-3000:]
    assert (f"process is worker {index}, which is {'' if index == 0 else 'not '}the "
            'chief') in output
    assert 'A multi-worker session needs a global step' in output


@pytest.mark.parametrize('strategy_type, use', [
    (tf.distribute.experimental.ParameterServerStrategy,
     'Use MultiWorkerMirroredStrategy'),
    (tf.distribute.TPUStrategy, 'Use MirroredStrategy or MultiWorkerMirroredStrategy'),
])
def test_parameter_server_and_tpu_strategies_are_refused(strategy_type, use):
  # Not constructed: either needs a cluster or a TPU. The check is by type.
  strategy = strategy_type.__new__(strategy_type)
  with pytest.raises(ValueError, match=use):
    tfmon.train.MonitoredTrainingSession(strategy=strategy)
