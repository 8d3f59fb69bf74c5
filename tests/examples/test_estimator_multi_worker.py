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


def test_the_tutorial_trains_its_shards_on_two_workers_to_the_datasets_end(tmp_path):
  done = subprocess.run(
      [sys.executable, '-m', 'tfmon.examples.launch', '--workers', '2', '--',
       sys.executable, os.path.join(_ROOT, 'examples', 'estimator_multi_worker.py'),
       f'--model_dir={tmp_path}', '--examples=1024'],
      cwd=_ROOT, capture_output=True, text=True, timeout=240)
  log = done.stdout + done.stderr
  assert done.returncode == 0, log[-3000:]
  # 1,024 examples, a shard of 512 a worker in batches of 64: both end after 8.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-8')
  assert not [n for n in os.listdir(tmp_path) if n.startswith('workertemp')]
  assert {'conv2d/kernel', 'dense_1/bias', 'global_step'} <= set(
      tf.train.load_checkpoint(str(tmp_path / 'model.ckpt-8')).get_variable_to_shape_map())
  for worker in (0, 1):  # each logs its own loss (absl's format, under app.run)
    assert re.search(rf'\[worker {worker}\] I.*\] loss = [\d.]+, step = 0', log)
  assert 'is ignored' not in log  # no master warning: the strategy has the cluster
