"""The Keras custom-loop and write-your-own-hook examples run and do what they say."""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

_EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'examples')


def _run(script, *args):
  return subprocess.run([sys.executable, os.path.join(_EXAMPLES, script), *args],
                        capture_output=True, text=True, timeout=180, check=True).stderr


@pytest.mark.slow
def test_keras_custom_loop_logs_each_epoch_and_checkpoints(tmp_path):
  log = _run('keras_custom_loop.py', f'--train_dir={tmp_path}', '--epochs=2')
  accuracies = re.findall(r'step (\d+): running accuracy = ([\d.]+)', log)
  assert [int(step) for step, _ in accuracies] == [16, 32]
  assert tf.train.latest_checkpoint(tmp_path).endswith('model.ckpt-32')


@pytest.mark.slow
def test_write_your_own_hook_stops_at_the_target_loss():
  log = _run('write_your_own_hook.py')
  match = re.search(r'Loss ([\d.]+) reached the target 0.0500 after (\d+) runs', log)
  assert match and float(match.group(1)) < 0.05
  assert int(match.group(2)) % 10 == 0  # it only looks every 10 runs
  assert f'trained from step 0 to {match.group(2)}.' in log
