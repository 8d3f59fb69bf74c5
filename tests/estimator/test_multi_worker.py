"""Estimator on TF_CONFIG's cluster under RunConfig(train_distribute=
MultiWorkerMirroredStrategy()): a chief, a worker and an evaluator task run
`train_and_evaluate` (tests/estimator/multiworker_job.py) as TF 2.15's
Estimator ran it, on localhost ports."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tfmon.examples import launch

pytestmark = pytest.mark.slow  # task processes: run by .ci/run, left out by -m "not slow"

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_JOB = [sys.executable, '-m', 'tests.estimator.multiworker_job']


def _run(model_dir, tasks):
  """Runs the job as `tasks` ((type, index) pairs of one cluster), or with no
  TF_CONFIG for `tasks=None`: per task, (exit code, RESULT dict, output)."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  configs = [None]
  if tasks:
    ports = iter(launch.free_ports(len(tasks)))
    cluster = {}
    for kind, _ in tasks:
      cluster.setdefault(kind, []).append(f'localhost:{next(ports)}')
    configs = [json.dumps({'cluster': cluster, 'task': {'type': kind, 'index': index}})
               for kind, index in tasks]
  processes = [subprocess.Popen(
      [*_JOB, str(model_dir)], cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, env=env if config is None else {**env, 'TF_CONFIG': config})
      for config in configs]
  runs = []
  try:
    for process in processes:
      output = process.communicate(timeout=120)[0]
      lines = [l for l in output.splitlines() if l.startswith('RESULT:')]
      runs.append((process.returncode, json.loads(lines[-1][7:]) if lines else None, output))
  finally:
    for process in processes:
      process.kill()
  for code, _, output in runs:
    assert code == 0, output[-3000:]
  return [result for _, result, _ in runs]


def test_a_chief_a_worker_and_an_evaluator_train_and_evaluate_as_tf_did(tmp_path):
  [single] = _run(tmp_path / 'single', None)
  chief, worker, evaluator = _run(
      tmp_path / 'cluster', [('chief', 0), ('worker', 0), ('evaluator', 0)])
  assert (chief['task'], worker['task'], evaluator['task']) == ('chief', 'worker', 'evaluator')
  assert (chief['is_chief'], worker['is_chief']) == (True, False)
  # Each worker's input_fn read its share of every global batch: together
  # they trained what one process trains on the whole batch (Adam, 20 steps).
  assert chief['w'] == worker['w']
  assert chief['w'] == pytest.approx(single['w'], abs=1e-5)
  # The workers only train; the evaluator evaluated until the last step, and
  # its numbers are those of the one-process run's final evaluation.
  assert chief['eval'] is None and worker['eval'] is None
  assert evaluator['eval']['global_step'] == single['eval']['global_step'] == 20
  assert evaluator['eval']['loss'] == pytest.approx(single['eval']['loss'], rel=1e-5)
  # The chief's checkpoints, under TF1's names; the worker's are gone.
  model_dir = tmp_path / 'cluster'
  state = tf.train.get_checkpoint_state(str(model_dir))
  assert [int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths] == [0, 10, 20]
  assert {'w', 'b', 'global_step'} <= set(
      tf.train.load_checkpoint(state.model_checkpoint_path).get_variable_to_shape_map())
  assert not [n for n in os.listdir(model_dir) if n.startswith('workertemp')]
  assert os.listdir(model_dir / 'eval')  # the evaluator's events
