"""Damaged checkpoints: found at restore, set aside (never deleted), and the
newest good one restored; a directory with only damaged ones is refused."""

import logging
import os

import pytest
import tensorflow as tf

import tfmon
from tests.training import Job, forget_global_step

_DATA = 'model.ckpt-20.data-00000-of-00001'
_INDEX = 'model.ckpt-20.index'


def _truncate(path):
  with open(path, 'rb') as f:
    content = f.read()
  with open(path, 'wb') as f:
    f.write(content[:len(content) // 2])


def _flip_byte(path, where=0.5):
  with open(path, 'rb') as f:
    content = bytearray(f.read())
  content[int(len(content) * where)] ^= 0xFF
  with open(path, 'wb') as f:
    f.write(bytes(content))


def _write(text):
  def damage(path):
    with open(path, 'w') as f:
      f.write(text)
  return damage


def _trained(tmp_path):
  """A job trained to step 20, with checkpoints at 0, 10 and 20."""
  Job().train(20, checkpoint_dir=str(tmp_path), save_checkpoint_steps=10,
              save_summaries_steps=None, log_step_count_steps=None)
  forget_global_step()


def _restore(tmp_path):
  """What a restarting job does: returns its global step after creation."""
  job = Job(init_seed=1)
  tfmon.train.ChiefSessionCreator(
      scaffold=tfmon.train.Scaffold(checkpoint=job.checkpoint),
      checkpoint_dir=str(tmp_path)).create_session()
  return int(job.global_step.numpy())


# (file damaged, how, what the log says about it)
_DAMAGED_CHECKPOINT_FILES = [
    (_DATA, _truncate, 'Read less bytes than requested'),
    (_DATA, _flip_byte, 'Checksum does not match'),
    (_DATA, os.remove, 'no data file: missing'),
    (_INDEX, _truncate, 'sstable'),
    (_INDEX, _flip_byte, 'corrupt'),
    (_INDEX, _write(''), 'too short to be an sstable'),
    (_INDEX, os.remove, None),  # the state file then names a missing checkpoint
]


@pytest.mark.parametrize('name, damage, reason', _DAMAGED_CHECKPOINT_FILES,
                         ids=lambda value: getattr(value, '__name__', None))
def test_a_damaged_newest_checkpoint_is_set_aside_and_the_previous_restored(
    tmp_path, caplog, name, damage, reason):
  _trained(tmp_path)
  damage(tmp_path / name)
  assert _restore(tmp_path) == 10
  if reason is not None:
    assert f'Checkpoint {tmp_path}/model.ckpt-20 is damaged: ' in caplog.text
    damaged = (str(tmp_path / name) if name == _INDEX else
               str(tmp_path / 'model.ckpt-20.data-'))
    assert damaged in caplog.text and reason in caplog.text
    # Kept, renamed aside: nothing is deleted.
    assert os.path.exists(tmp_path / (_INDEX + '.damaged'))
    if damage is not os.remove:
      assert os.path.exists(tmp_path / (_DATA + '.damaged'))
  else:
    assert 'state file' in caplog.text and 'is damaged' in caplog.text
  assert not os.path.exists(tmp_path / _INDEX)
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-10')
  # The next start restores the same checkpoint without complaint.
  caplog.clear()
  forget_global_step()
  assert _restore(tmp_path) == 10
  assert 'is damaged' not in caplog.text  # (the test's directory name holds 'damaged')


@pytest.mark.parametrize('content', [
    'model_checkpoint_path: "model.ck',  # truncated in the middle of a string
    '\x00\xff\x13 not a text proto',
    '',  # TensorFlow raises ValueError('Invalid checkpoint state') for this one
    'model_checkpoint_path: "model.ckpt-99"\n',  # names what does not exist
], ids=['truncated', 'garbage', 'empty', 'names-missing'])
def test_a_damaged_state_file_is_set_aside_and_the_newest_checkpoint_found(
    tmp_path, caplog, content):
  _trained(tmp_path)
  _write(content)(tmp_path / 'checkpoint')
  assert _restore(tmp_path) == 20  # TensorFlow alone would start from scratch
  assert f'The checkpoint state file {tmp_path}/checkpoint is damaged' in caplog.text
  with open(tmp_path / 'checkpoint.damaged') as f:
    assert f.read() == content
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-20')


def test_checkpoints_without_a_state_file_are_restored_not_ignored(tmp_path):
  _trained(tmp_path)
  os.remove(tmp_path / 'checkpoint')
  assert _restore(tmp_path) == 20


def test_with_no_good_checkpoint_it_refuses_listing_what_it_tried(tmp_path):
  _trained(tmp_path)
  for step in (0, 10, 20):
    _truncate(tmp_path / f'model.ckpt-{step}.data-00000-of-00001')
  with pytest.raises(RuntimeError) as error:
    _restore(tmp_path)
  message = str(error.value)
  assert f'No good checkpoint to restore in {tmp_path}' in message
  assert 'refusing to start training from scratch' in message
  for step in (20, 10, 0):
    assert (f'{tmp_path}/model.ckpt-{step}: {tmp_path}/model.ckpt-{step}.data-'
            "00000-of-00001: reading '_CHECKPOINTABLE_OBJECT_GRAPH': OutOfRangeError: "
            'Read less bytes than requested') in message
  assert 'move the files out of the directory' in message
  # The next start refuses too: the damaged files are still there, set aside.
  forget_global_step()
  with pytest.raises(RuntimeError, match='Damaged files set aside: .*model.ckpt-0'):
    _restore(tmp_path)
  for step in (0, 10, 20):
    assert os.path.exists(tmp_path / f'model.ckpt-{step}.data-00000-of-00001.damaged')
    assert os.path.exists(tmp_path / f'model.ckpt-{step}.index.damaged')


def test_monitored_training_session_refuses_rather_than_training_from_scratch(
    tmp_path):
  _trained(tmp_path)
  _write('garbage')(tmp_path / 'checkpoint')
  for name in os.listdir(tmp_path):
    if name.endswith('.index'):
      _flip_byte(tmp_path / name)
  job = Job()
  with pytest.raises(RuntimeError, match='No good checkpoint to restore'):
    job.train(30, checkpoint_dir=str(tmp_path))
  assert not tf.io.gfile.glob(str(tmp_path / '*.index'))  # nothing new was saved


def test_an_explicit_damaged_checkpoint_is_refused_naming_the_file(tmp_path):
  _trained(tmp_path)
  _flip_byte(tmp_path / _DATA)
  job = Job()
  with pytest.raises(RuntimeError, match=f'Checkpoint {tmp_path}/model.ckpt-20 is '
                     f'damaged: {tmp_path}/{_DATA}: .*Checksum does not match'):
    tfmon.train.SingularMonitoredSession(
        scaffold=tfmon.train.Scaffold(checkpoint=job.checkpoint),
        checkpoint_filename_with_path=str(tmp_path / 'model.ckpt-20'))
  assert os.path.exists(tmp_path / _DATA)  # the user's own file: left as it is


def test_a_damaged_checkpoint_with_an_input_pipeline_resumes_from_the_previous(
    tmp_path):
  # Iterator state is a variant tensor: checked by reading it, as the rest.
  def train(last_step):
    global_step = tfmon.train.get_or_create_global_step()
    iterator = iter(tf.data.Dataset.range(1000))
    seen = []
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), checkpoint={'iterator': iterator},
        save_checkpoint_steps=5, save_summaries_steps=None,
        log_step_count_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
      while not sess.should_stop():
        def step():
          global_step.assign_add(1)
          return {'x': next(iterator)}
        seen.append(int(sess.run(step)['x']))
    forget_global_step()
    return seen

  assert train(10) == list(range(10))
  _truncate(tmp_path / 'model.ckpt-10.data-00000-of-00001')
  assert train(12) == [5, 6, 7, 8, 9, 10, 11]


@pytest.mark.parametrize('spelling', ['relative', 'dot-relative', 'home', 'symlink',
                                      'absolute'])
def test_a_healthy_directory_is_never_reported_damaged_however_it_is_named(
    tmp_path, monkeypatch, caplog, spelling):
  caplog.set_level(logging.INFO)
  (tmp_path / 'real').mkdir()
  os.symlink(tmp_path / 'real', tmp_path / 'linked')
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv('HOME', str(tmp_path))
  directory = {'relative': 'real/ckpt', 'dot-relative': './real/ckpt',
               'home': '~/real/ckpt', 'symlink': str(tmp_path / 'linked' / 'ckpt'),
               'absolute': str(tmp_path / 'real' / 'ckpt')}[spelling]
  for last_step in (10, 20, 30):  # run, then rerun twice
    forget_global_step()
    Job().train(last_step, checkpoint_dir=directory, save_checkpoint_steps=5,
                save_summaries_steps=None, log_step_count_steps=None, max_to_keep=None)
  assert 'is damaged' not in caplog.text
  files = os.listdir(tmp_path / 'real' / 'ckpt')
  assert not [f for f in files if 'damaged' in f]
  assert not os.path.exists(tmp_path / '~')  # '~' was not taken literally
  state = tf.train.get_checkpoint_state(str(tmp_path / 'real' / 'ckpt'))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      f'model.ckpt-{step}' for step in range(0, 31, 5)]
  restored = [r.getMessage().rsplit('/', 1)[-1] for r in caplog.records
              if r.getMessage().startswith('Restoring parameters from ')]
  assert restored == ['model.ckpt-10', 'model.ckpt-20']
