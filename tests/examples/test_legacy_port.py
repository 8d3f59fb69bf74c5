"""The TF1 script and its tfmon port show the same hook behaviour."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

_EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'examples')


def _run(script, train_dir):
  result = subprocess.run(
      [sys.executable, os.path.join(_EXAMPLES, script), f'--train_dir={train_dir}',
       '--max_steps=60', '--log_every=10', '--save_steps=25'],
      capture_output=True, text=True, timeout=180, check=True)
  logged = [(int(step), float(loss)) for step, loss in
            re.findall(r'step (\d+): loss = ([\d.]+)', result.stderr)]
  state = tf.train.get_checkpoint_state(str(train_dir))
  saved = [int(p.rsplit('-', 1)[-1]) for p in state.all_model_checkpoint_paths]
  return logged, saved


@pytest.mark.slow
def test_tf1_script_and_tfmon_port_log_save_and_stop_alike(tmp_path):
  tf1_logged, tf1_saved = _run('tf1_legacy_train.py', tmp_path / 'tf1')
  port_logged, port_saved = _run('tfmon_port_train.py', tmp_path / 'tfmon')
  assert [step for step, _ in port_logged] == [step for step, _ in tf1_logged] == [
      10, 20, 30, 40, 50, 60]
  assert port_saved == tf1_saved == [0, 25, 50, 60]
  # Same data, model and learning rate: the first logged losses agree closely.
  assert port_logged[0][1] == pytest.approx(tf1_logged[0][1], abs=1e-3)


def _train(script, train_dir, max_steps):
  subprocess.run(
      [sys.executable, os.path.join(_EXAMPLES, script), f'--train_dir={train_dir}',
       f'--max_steps={max_steps}', '--save_steps=25'],
      capture_output=True, text=True, timeout=180, check=True)
  return tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))


@pytest.mark.slow
def test_the_port_continues_a_tf1_checkpoint_as_tf1_would(tmp_path):
  _train('tf1_legacy_train.py', tmp_path / 'job', 30)
  port = _train('tfmon_port_train.py', tmp_path / 'job', 60)  # from model.ckpt-30
  tf1 = _train('tf1_legacy_train.py', tmp_path / 'uninterrupted', 60)
  assert port.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == 60
  for name in ('weights', 'bias'):
    np.testing.assert_allclose(port.get_tensor(f'{name}/.ATTRIBUTES/VARIABLE_VALUE'),
                               tf1.get_tensor(name), rtol=1e-5, atol=1e-6)
