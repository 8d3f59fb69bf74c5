"""TensorFlow's multi-worker Estimator tutorial (examples/estimator_multi_worker.py)
on 2 local workers started by tfmon.examples.launch, with the tutorial's
TF_CONFIG of workers alone."""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

pytest.importorskip('tf_keras')  # the tutorial's Reduction.NONE is Keras 2's
pytestmark = pytest.mark.slow  # worker processes: run by .ci/run

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _launch(model_dir, examples):
  done = subprocess.run(
      [sys.executable, '-m', 'tfmon.examples.launch', '--workers', '2', '--',
       sys.executable, os.path.join(_ROOT, 'examples', 'estimator_multi_worker.py'),
       f'--model_dir={model_dir}', f'--examples={examples}'],
      cwd=_ROOT, capture_output=True, text=True, timeout=240)
  return done.returncode, done.stdout + done.stderr


def test_the_tutorial_trains_its_shards_on_two_workers_to_the_datasets_end(tmp_path):
  code, log = _launch(tmp_path, 1024)
  assert code == 0, log[-3000:]
  # 1,024 examples, a shard of 512 a worker in batches of 64: both end after 8.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-8')
  assert not [n for n in os.listdir(tmp_path) if n.startswith('workertemp')]
  assert {'conv2d/kernel', 'dense_1/bias', 'global_step'} <= set(
      tf.train.load_checkpoint(str(tmp_path / 'model.ckpt-8')).get_variable_to_shape_map())
  for worker in (0, 1):  # each logs its own loss (absl's format, under app.run)
    assert re.search(rf'\[worker {worker}\] I.*\] loss = [\d.]+, step = 0', log)
  assert 'is ignored' not in log  # no master warning: the strategy has the cluster


def test_shards_of_unequal_batches_end_in_an_error_naming_the_cause_not_a_hang(tmp_path):
  # 1,025 examples: worker 0's shard has 9 batches, worker 1's 8. Worker 1
  # leaves at its input's end; worker 0, waiting for it in step 9's
  # all-reduce, fails naming it instead of waiting for good.
  code, log = _launch(tmp_path, 1025)
  assert code == 1, log[-3000:]
  assert "[worker 1] " in log and "This worker's input ended (OutOfRangeError)" in log
  assert ('UnavailableError: Worker 0 lost worker 1 of its multi-worker strategy: '
          'worker 1 stopped (failed, was killed, exited, or its input ended before '
          "this worker's: every worker needs as many batches)") in log
