"""Saves into a read-only directory or onto a full filesystem, and summaries onto a
full one: the previous checkpoint and state file stay intact and the error names
what failed; a failing summary writer is logged once and training goes on.

A read-only directory is real for any user: chmod for a normal user, and for
root (whom permissions do not stop) the training runs as `nobody` (seteuid).
The full filesystem is a tiny tmpfs, which only root can mount: without root
those tests skip.
"""

import contextlib
import os
import subprocess
import tempfile

import pytest
import tensorflow as tf

from tests.training import Job, forget_global_step

_NOBODY = 65534


@contextlib.contextmanager
def _read_only(directory):
  """Makes `directory` read-only for this process while inside."""
  os.chmod(directory, 0o555)
  as_nobody = os.geteuid() == 0
  try:
    if as_nobody:
      os.seteuid(_NOBODY)  # root writes anywhere; nobody cannot write here
    yield
  finally:
    if as_nobody:
      os.seteuid(0)
    os.chmod(directory, 0o755)


@pytest.fixture
def shared_dir():
  """A directory `nobody` can reach (pytest's tmp_path is root's alone)."""
  directory = tempfile.mkdtemp(prefix='tfmon_save_failures_')
  os.chmod(directory, 0o755)
  yield directory
  subprocess.run(['rm', '-rf', directory], check=False)


@pytest.fixture
def tiny_tmpfs():
  """Mounts a 1 MiB tmpfs; skips without the privilege to mount."""
  directory = tempfile.mkdtemp(prefix='tfmon_tmpfs_')
  mounted = os.geteuid() == 0 and subprocess.run(
      ['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', directory],
      capture_output=True, check=False).returncode == 0
  if not mounted:
    os.rmdir(directory)
    pytest.skip('mounting a tmpfs needs root (CAP_SYS_ADMIN)')
  yield directory
  subprocess.run(['umount', '-l', directory], check=False)  # writers may hold files
  os.rmdir(directory)


def _fill(directory):
  """Fills the filesystem of `directory`."""
  fd = os.open(os.path.join(directory, 'filler'), os.O_WRONLY | os.O_CREAT)
  try:
    while True:
      os.write(fd, b'\0' * 65536)
  except OSError:
    pass
  finally:
    os.close(fd)


def _contents(directory):
  result = {}
  for name in sorted(os.listdir(directory)):
    if name != 'filler':
      with open(os.path.join(directory, name), 'rb') as f:
        result[name] = f.read()
  return result


def _train(job, last_step, checkpoint_dir, **kwargs):
  kwargs.setdefault('save_summaries_steps', None)
  kwargs.setdefault('log_step_count_steps', None)
  return job.train(last_step, checkpoint_dir=checkpoint_dir, save_checkpoint_steps=10,
                   **kwargs)


def _train_to_10_then_fail_at_20(directory, make_saves_fail):
  _train(Job(), 10, directory)
  forget_global_step()
  before = _contents(directory)
  job = Job()
  with make_saves_fail(directory):
    with pytest.raises(RuntimeError) as error:
      _train(job, 30, directory)
  assert _contents(directory) == before  # state file and checkpoints untouched
  assert tf.train.latest_checkpoint(directory) == f'{directory}/model.ckpt-10'
  return str(error.value)


def test_a_save_into_a_read_only_directory_keeps_the_previous_and_says_why(
    shared_dir):
  message = _train_to_10_then_fail_at_20(shared_dir, _read_only)
  assert message.startswith(f'Saving checkpoint for step 20 into {shared_dir}/'
                            'model.ckpt-20 failed: ')
  assert 'Permission denied' in message
  assert f'the latest checkpoint is still {shared_dir}/model.ckpt-10' in message


def test_a_save_onto_a_full_filesystem_keeps_the_previous_and_says_why(tiny_tmpfs):

  @contextlib.contextmanager
  def full(directory):
    _fill(directory)
    yield

  message = _train_to_10_then_fail_at_20(tiny_tmpfs, full)
  assert message.startswith(f'Saving checkpoint for step 20 into {tiny_tmpfs}/'
                            'model.ckpt-20 failed: ')
  assert 'No space left on device' in message
  assert not [name for name in os.listdir(tiny_tmpfs) if 'ckpt-20' in name]
  # Once there is room again, the job resumes from the previous checkpoint.
  os.remove(os.path.join(tiny_tmpfs, 'filler'))
  forget_global_step()
  job = Job()
  _train(job, 20, tiny_tmpfs)
  assert tf.train.latest_checkpoint(tiny_tmpfs) == f'{tiny_tmpfs}/model.ckpt-20'


def test_a_failing_summary_writer_is_logged_once_and_training_goes_on(
    tiny_tmpfs, tmp_path, caplog):
  summary_dir = os.path.join(tiny_tmpfs, 'summaries')

  class FillAfterStep(tf.compat.v1.train.SessionRunHook):

    def __init__(self):
      self.runs = 0

    def after_run(self, run_context, run_values):
      self.runs += 1
      if self.runs == 3:
        _fill(tiny_tmpfs)

  job = Job()
  # 100 steps: the events written after the filesystem is full (~120 bytes a
  # step) must outgrow what is left of the event file's last page, which tmpfs
  # allocated before: up to 4 KiB, as the graph written first happens to end.
  losses = _train(job, 100, str(tmp_path), summary_dir=summary_dir,
                  save_summaries_steps=1, log_step_count_steps=1,
                  hooks=[FillAfterStep()])
  assert len(losses) == 100 and job.global_step.numpy() == 100
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-100')
  failures = [r for r in caplog.records if 'Writing summaries to' in r.getMessage()]
  assert len(failures) == 1, [r.getMessage() for r in failures]
  assert (f'Writing summaries to {summary_dir} failed, so no more are written there; '
          'training and checkpoints go on.') in failures[0].getMessage()
  assert 'No space left on device' in failures[0].getMessage()
