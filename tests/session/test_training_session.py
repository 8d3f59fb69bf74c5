"""MonitoredTrainingSession: v1's defaults and hooks, end to end on disk."""

import json
import logging
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import tensorflow as tf

import tfmon
from tests import event_files
from tests.training import Job, forget_global_step


def _hook_names(sess):
  return [type(hook).__name__ for hook in sess._hooks]  # pylint: disable=protected-access


class Marker(tfmon.train.SessionRunHook):
  pass


def test_default_hooks_in_v1_order(tmp_path):
  Job()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), hooks=[Marker()], chief_only_hooks=[Marker()]) as sess:
    names = _hook_names(sess)
  assert names == [
      'Marker', 'StepCounterHook', 'SummarySaverHook', 'CheckpointSaverHook', 'Marker']


def test_duties_can_be_turned_off(tmp_path):
  Job()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), log_step_count_steps=None,
      save_summaries_steps=None, save_checkpoint_secs=None) as sess:
    assert _hook_names(sess) == []


def test_defaults_checkpoint_every_600_secs_and_summarize_every_100_steps(tmp_path):
  job = Job()
  job.train(150, checkpoint_dir=str(tmp_path))
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert [p.rsplit('-', 1)[-1] for p in state.all_model_checkpoint_paths] == ['0', '150']
  events = event_files.events(tmp_path)
  assert event_files.steps(events, 'loss') == [1, 101]
  assert event_files.scalars(events, 'global_step/sec')[0] == [101]  # v1's simple_value


def test_summary_dir_separates_summaries_from_checkpoints(tmp_path):
  Job().train(3, checkpoint_dir=str(tmp_path / 'ckpt'),
              summary_dir=str(tmp_path / 'logs'), save_summaries_steps=1)
  assert tf.train.latest_checkpoint(tmp_path / 'ckpt').endswith('model.ckpt-3')
  assert len(list((tmp_path / 'logs').glob('events.out.tfevents.*'))) == 1  # one writer
  assert not list((tmp_path / 'ckpt').glob('events.out.tfevents.*'))


def test_worker_restores_and_runs_only_its_hooks(tmp_path, caplog):
  Job().train(4, checkpoint_dir=str(tmp_path), save_checkpoint_steps=2)
  forget_global_step()
  worker = Job(init_seed=1)
  caplog.set_level(logging.INFO)
  losses = worker.train(6, checkpoint_dir=str(tmp_path), is_chief=False)
  assert len(losses) == 2  # resumed at 4
  assert tf.train.latest_checkpoint(tmp_path).endswith('model.ckpt-4')  # no saving


def test_missing_global_step_says_how_to_create_it(tmp_path):
  with pytest.raises(RuntimeError, match=r'^Global step should be created to use '
                     r'StepCounterHook\. Create it .*get_or_create_global_step\(\)'):
    tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path))


def test_bad_hooks_are_named():
  with pytest.raises(TypeError, match=r'chief_only_hooks\[0\] is'):
    tfmon.train.MonitoredTrainingSession(chief_only_hooks=['logger'])


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_tensorboard_serves_the_loss_series(tmp_path):
  job = Job()
  losses = job.train(6, checkpoint_dir=str(tmp_path), save_summaries_steps=2)
  port = _free_port()
  server = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', '--logdir', str(tmp_path),
       '--host', '127.0.0.1', '--port', str(port), '--reload_interval', '1'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  url = (f'http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=.&tag=loss')
  try:
    deadline = time.time() + 90
    series = None
    while time.time() < deadline and not series:
      try:
        with urllib.request.urlopen(url, timeout=5) as response:
          series = json.load(response)
      except (OSError, ValueError):
        time.sleep(0.5)
    assert series, 'tensorboard did not serve the loss series within 90 s'
  finally:
    server.terminate()
    server.wait(timeout=30)
  assert [step for _, step, _ in series] == [1, 3, 5]
  assert [value for _, _, value in series] == pytest.approx(
      [losses[0], losses[2], losses[4]])


def test_a_directory_that_is_a_file_is_named_at_creation(tmp_path):
  tfmon.train.get_or_create_global_step()
  a_file = tmp_path / 'model'
  a_file.write_text('not a directory')
  for kwargs, name in [(dict(checkpoint_dir=str(a_file)), 'checkpoint_dir'),
                       (dict(checkpoint_dir=str(tmp_path), summary_dir=str(a_file)),
                        'summary_dir')]:
    with pytest.raises(ValueError, match=f"^{name}='{a_file}' is a file, not a "
                       'directory'):
      tfmon.train.MonitoredTrainingSession(**kwargs)
  with pytest.raises(ValueError, match=f"^checkpoint_dir='{a_file}/run' is under "
                     f"'{a_file}', which is a file"):
    tfmon.train.CheckpointSaverHook(str(a_file / 'run'), save_steps=1)
  for make, name in [
      (lambda: tfmon.train.SummarySaverHook(save_steps=1, output_dir=str(a_file)),
       'SummarySaverHook output_dir'),
      (lambda: tfmon.train.StepCounterHook(output_dir=str(a_file)),
       'StepCounterHook output_dir'),
      (lambda: tfmon.train.ChiefSessionCreator(checkpoint_dir=str(a_file)),
       'checkpoint_dir')]:
    with pytest.raises(ValueError, match=f"^{name}='{a_file}' is a file"):
      make()
