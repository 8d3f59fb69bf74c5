"""Captured TF1 graphs on MultiWorkerMirroredStrategy: two local worker
processes (tests/session/graph_multiworker_job.py) train the weights one
process trains on the whole batch, and stop together.

The workers' collective ops time out after 30 s, so a worker left waiting
alone in one (a regression of the stop agreement) fails the test instead of
hanging it."""

import functools
import json
import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

from tests.session.test_multiworker import _checkpoint_steps, _finish, _no_worker_temp, _start

pytestmark = pytest.mark.slow  # worker processes: run by .ci/run, left out by -m "not slow"

_JOB = ['-m', 'tests.session.graph_multiworker_job']
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _result(output):
  lines = [line for line in output.splitlines() if line.startswith('RESULT:')]
  return json.loads(lines[-1][len('RESULT:'):]) if lines else None


def _workers(train_dir, **config):
  """Runs the job on 2 workers: per worker, (exit code, RESULT dict, output)."""
  config['train_dir'] = str(train_dir)
  return [(code, _result(output), output)
          for code, output in _finish(_start([*_JOB, json.dumps(config)]))]


def _one_process(**config):
  """The same job in one process (no TF_CONFIG), on the whole batch."""
  config = {'optimizer': 'sgd', 'input': 'feed', 'steps_per_loop': 1, **config}
  return _one_process_run(json.dumps(config, sort_keys=True))


@functools.cache  # a run's result depends on its config only
def _one_process_run(config):
  env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
  with tempfile.TemporaryDirectory() as train_dir:
    config = dict(json.loads(config), train_dir=train_dir)
    done = subprocess.run([sys.executable, *_JOB, json.dumps(config)], cwd=_ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120)
  assert done.returncode == 0, done.stdout[-3000:]
  return _result(done.stdout)


def _ok(runs, code=0):
  assert [run[0] for run in runs] == [code, code], runs[0][2][-3000:] + runs[1][2][-3000:]


def _weights(result):
  return result['w'] + result['b']


@pytest.mark.parametrize('optimizer, data, steps_per_loop, session', [
    ('sgd', 'feed', 1, 'tfmon'),      # feed_dict: each worker feeds its share
    ('adam', 'dataset', 5, 'tfmon'),  # tf.data sharded by input_context; fused runs
    ('sgd', 'feed', 1, 'tf'),         # TF's own MonitoredTrainingSession
])
def test_two_workers_train_what_one_process_trains_on_the_whole_batch(
    tmp_path, optimizer, data, steps_per_loop, session):
  config = dict(last_step=20, optimizer=optimizer, input=data,
                steps_per_loop=steps_per_loop)
  single = _one_process(**config)
  runs = _workers(tmp_path / 'workers', session=session, **config)
  _ok(runs)
  # TF's own sessions have no stop agreement, and say so.
  assert [("TF's own sessions run this graph of a multi-worker strategy without "
           "the workers' stop agreement") in output for _, _, output in runs] == [
               session == 'tf'] * 2
  chief, worker = runs[0][1], runs[1][1]
  assert single['step'] == chief['step'] == worker['step'] == 20
  assert _weights(chief) == _weights(worker)
  assert _weights(chief) == pytest.approx(_weights(single), abs=1e-5)
  assert _weights(chief) != pytest.approx([0.0] * 5, abs=0.1)  # it trained
  if steps_per_loop > 1:  # tfmon's StopAtStepHook lets runs fuse 5 steps
    assert chief['runs'] == worker['runs'] <= 6
  # The chief's checkpoints hold the graph's TF1 names and its .meta.
  assert _checkpoint_steps(tmp_path / 'workers') == [0, 10, 20]
  assert _no_worker_temp(tmp_path / 'workers')
  reader = tf.train.load_checkpoint(str(tmp_path / 'workers' / 'model.ckpt-20'))
  assert reader.get_tensor('w').ravel().tolist() == pytest.approx(chief['w'])
  assert os.path.exists(tmp_path / 'workers' / 'model.ckpt-20.meta')


@pytest.mark.parametrize('data, steps_per_loop, at', [
    ('feed', 1, [1, 7, 'stop']),      # worker 1 alone asks to stop after step 7
    ('dataset', 5, [0, 12, 'stop']),  # the chief alone, in fused runs
])
def test_a_worker_stopping_alone_stops_both_after_the_same_step(
    tmp_path, data, steps_per_loop, at):
  runs = _workers(tmp_path, last_step=20, input=data, steps_per_loop=steps_per_loop,
                  at=at)
  _ok(runs)
  chief, worker = runs[0][1], runs[1][1]
  assert chief['step'] == worker['step'] == at[1]
  assert _weights(chief) == _weights(worker)
  assert _checkpoint_steps(tmp_path)[-1] == at[1]


def test_sigterm_to_one_worker_saves_the_step_both_resume_from(tmp_path):
  single = _one_process(last_step=20)
  runs = _workers(tmp_path / 'workers', last_step=20, at=[1, 7, 'SIGTERM'])
  _ok(runs, code=143)
  assert [run[1]['step'] for run in runs] == [7, 7]
  assert 'Another worker received SIGTERM' in runs[0][2]
  assert _checkpoint_steps(tmp_path / 'workers') == [0, 7]
  resumed = _workers(tmp_path / 'workers', last_step=20)
  _ok(resumed)
  assert [(run[1]['start'], run[1]['step']) for run in resumed] == [(7, 20)] * 2
  # Feeds follow the global step: the same weights as without the stop.
  assert _weights(resumed[0][1]) == pytest.approx(_weights(single), abs=1e-5)
