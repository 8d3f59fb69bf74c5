"""BERT's run_classifier.py skeleton on TPUEstimator(use_tpu=False): it trains,
evaluates, predicts and writes BERT's result files; use_tpu fails naming the fix."""

import os
import subprocess
import sys

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'examples',
                       'tpu_estimator_cpu.py')


def _run(*args, check=True):
  return subprocess.run([sys.executable, _SCRIPT, *args], capture_output=True,
                        text=True, timeout=300, check=check)


@pytest.mark.slow
def test_trains_evaluates_predicts_and_writes_berts_result_files(tmp_path):
  log = _run(f'--output_dir={tmp_path}', '--do_train', '--do_eval', '--do_predict').stderr
  with open(tmp_path / 'eval_results.txt') as f:
    results = dict(line.strip().split(' = ') for line in f)
  assert sorted(results) == ['eval_accuracy', 'eval_loss', 'global_step', 'loss']
  assert results['global_step'] == '160' and float(results['eval_accuracy']) > 0.9
  with open(tmp_path / 'test_results.tsv') as f:
    rows = [[float(p) for p in line.split('\t')] for line in f]
  assert len(rows) == 40 and all(abs(sum(row) - 1) < 1e-5 for row in rows)
  assert 'Running train on CPU/GPU' in log and 'examples/sec: ' in log


@pytest.mark.slow
def test_use_tpu_fails_naming_the_fix(tmp_path):
  failed = _run(f'--output_dir={tmp_path}', '--do_train', '--use_tpu', check=False)
  assert failed.returncode != 0
  assert 'pass use_tpu=False' in failed.stderr
