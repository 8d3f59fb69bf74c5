"""The quickstart example trains, logs on schedule, checkpoints and resumes."""

import subprocess
import sys

import tensorflow as tf

import tfmon
from tfmon.examples import quickstart


def test_quickstart_trains_logs_and_checkpoints(tmp_path):
  logger = quickstart.train(str(tmp_path), max_steps=60, log_every=20)
  assert [step for step, _, _ in logger.logged] == [20, 40, 60]
  first_loss, last_loss = logger.logged[0][1], logger.logged[-1][1]
  assert last_loss < first_loss
  assert int(tfmon.train.get_global_step().numpy()) == 60
  assert tf.train.latest_checkpoint(tmp_path).endswith('model.ckpt-60')
  assert list(tmp_path.glob('events.out.tfevents.*'))


def _run(train_dir, max_steps):
  return subprocess.run(
      [sys.executable, '-m', 'tfmon.examples.quickstart', f'--train_dir={train_dir}',
       f'--max_steps={max_steps}', '--log_every=10'],
      capture_output=True, text=True, timeout=120, check=True).stderr


def test_quickstart_runs_as_a_module_and_resumes(tmp_path):
  first = _run(tmp_path, 30)
  assert 'step 30, loss = ' in first
  assert 'Done: global step 30.' in first
  assert f'tensorboard --logdir {tmp_path}' in first
  second = _run(tmp_path, 50)
  assert f'Restoring parameters from {tmp_path}/model.ckpt-30' in second
  assert 'step 40, loss = ' in second and 'step 30, loss' not in second
  assert 'Done: global step 50.' in second
