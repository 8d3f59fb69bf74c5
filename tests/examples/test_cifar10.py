"""The main job: CIFAR-10 training end to end, on synthetic and on official-format data."""

import glob
import logging
import os
import pickle
import subprocess
import sys
import time

from absl import flags
import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
import tensorflow as tf

from tests import event_files
from tests.training import forget_global_step
from tfmon.examples import cifar10
from tfmon.examples import cifar10_input

_SMALL = dict(batch_size=8, log_frequency=2, eval_every=3, eval_examples=32)


def _write_binary(directory, records_per_file=4, seed=0):
  rng = np.random.default_rng(seed)
  folder = directory / 'cifar-10-batches-bin'
  folder.mkdir(parents=True)
  written = {}
  for name in [f'data_batch_{i}.bin' for i in range(1, 6)] + ['test_batch.bin']:
    labels = rng.integers(0, 10, size=records_per_file, dtype=np.uint8)
    images = rng.integers(0, 256, size=(records_per_file, 3, 32, 32), dtype=np.uint8)
    records = np.concatenate([labels[:, None], images.reshape(records_per_file, -1)], 1)
    records.tofile(folder / name)
    written[name] = (images.transpose(0, 2, 3, 1), labels)
  return written


def _write_python(directory, records_per_file=4, seed=1):
  rng = np.random.default_rng(seed)
  folder = directory / 'cifar-10-batches-py'
  folder.mkdir(parents=True)
  written = {}
  for name in [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']:
    labels = [int(label) for label in rng.integers(0, 10, size=records_per_file)]
    data = rng.integers(0, 256, size=(records_per_file, 3072), dtype=np.uint8)
    with open(folder / name, 'wb') as f:
      pickle.dump({b'data': data, b'labels': labels}, f)
    written[name] = (data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels)
  return written


@pytest.mark.slow
def test_trains_on_synthetic_data_evaluates_and_resumes(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  first = cifar10.train(str(tmp_path), max_steps=6, **_SMALL)
  assert first['global_step'] == 6 and first['steps_this_run'] == 6
  assert 0.0 <= first['eval']['accuracy'] <= 1.0 and first['eval']['global_step'] == 6
  assert 'Data: synthetic CIFAR-shaped data' in caplog.text
  for step in (2, 4, 6):
    assert f'step {step}, loss = ' in caplog.text
  assert 'Saving dict for global step 3: accuracy = ' in caplog.text
  assert tf.train.latest_checkpoint(tmp_path).endswith('model.ckpt-6')
  events = event_files.events(tmp_path)
  assert event_files.scalars(events, 'total_loss')[0] == [1, 3, 5]
  assert event_files.scalars(event_files.events(tmp_path / 'eval'), 'accuracy')[0] == [3, 6]

  forget_global_step()
  caplog.clear()
  second = cifar10.train(str(tmp_path), max_steps=8, **_SMALL)
  assert second['global_step'] == 8 and second['steps_this_run'] == 2
  assert f'Restoring parameters from {tmp_path}/model.ckpt-6' in caplog.text
  assert 'Resuming from global step 6' in caplog.text

  # Re-running the finished job trains nothing, evaluates nothing again and
  # leaves nothing unrestored.
  forget_global_step()
  caplog.clear()
  third = cifar10.train(str(tmp_path), max_steps=8, **_SMALL)
  assert third['steps_this_run'] == 0 and third['eval']['global_step'] == 8
  assert 'Saving dict' not in caplog.text
  assert 'unrestored' not in caplog.text.lower()
  steps, _ = event_files.served(tmp_path / 'eval', 'accuracy')
  assert steps == [3, 6, 8]


@pytest.mark.slow
def test_summaries_are_the_tutorial_s_v1_ones_and_the_graph_is_written_once(
    tmp_path, caplog):
  cifar10.train(str(tmp_path), max_steps=2, **_SMALL)
  forget_global_step()
  cifar10.train(str(tmp_path), max_steps=4, **_SMALL)  # resumed, as the README says
  caplog.clear()
  events = event_accumulator.EventAccumulator(str(tmp_path))
  events.Reload()
  tags = events.Tags()
  layers = ['conv1', 'conv2', 'local3', 'local4', 'softmax_linear']
  # Scalars as TF1 wrote them (simple_value), which TF1-era readers see.
  assert set(tags['scalars']) >= {'cross_entropy', 'total_loss', 'learning_rate',
                                  *(f'{layer}/sparsity' for layer in layers)}
  assert [event.step for event in events.Scalars('total_loss')] == [1, 3]
  assert events.Scalars('learning_rate')[0].value == pytest.approx(0.05)
  assert sorted(event_files.simple_values(tmp_path, 'cross_entropy')) == [1, 3]
  assert sorted(tags['histograms']) == [f'{layer}/activations' for layer in layers]
  assert tags['images'] == ['images/image/0', 'images/image/1', 'images/image/2']
  assert not tags['tensors']
  # One graph, though two sessions wrote into the directory.
  assert tags['graph'] and 'more than one graph event' not in caplog.text
  assert sum(event.HasField('graph_def')
             for path in glob.glob(str(tmp_path / 'events.out.tfevents.*'))
             for event in tf.compat.v1.train.summary_iterator(path)) == 1


def test_reads_the_official_binary_format(tmp_path, caplog):
  written = _write_binary(tmp_path / 'data')
  data = cifar10_input.load(str(tmp_path / 'data'))
  np.testing.assert_array_equal(data.train[0][:4], written['data_batch_1.bin'][0])
  np.testing.assert_array_equal(data.test[1], written['test_batch.bin'][1])
  assert data.train[0].shape == (20, 32, 32, 3)
  caplog.set_level(logging.INFO)
  summary = cifar10.train(str(tmp_path / 'train'), str(tmp_path / 'data'),
                          max_steps=2, batch_size=4, log_frequency=1, eval_every=2,
                          eval_examples=0)
  assert summary['global_step'] == 2
  assert 'Data: CIFAR-10 binary files in' in caplog.text


def test_reads_the_official_python_format(tmp_path):
  written = _write_python(tmp_path)
  data = cifar10_input.load(str(tmp_path))
  np.testing.assert_array_equal(data.train[0][4:8], written['data_batch_2'][0])
  np.testing.assert_array_equal(data.test[1], written['test_batch'][1])
  assert data.source.startswith('CIFAR-10 python files in')


def test_a_directory_without_cifar_data_names_the_formats(tmp_path):
  (tmp_path / 'notes.txt').write_text('not cifar')
  with pytest.raises(ValueError, match=f'--data_dir {tmp_path} holds no CIFAR-10 '
                     'data. Expected the official CIFAR-10 binary files'):
    cifar10_input.load(str(tmp_path))
  with pytest.raises(ValueError, match='is not a directory'):
    cifar10_input.load(str(tmp_path / 'missing'))


def test_a_truncated_file_is_named(tmp_path):
  _write_binary(tmp_path / 'bin')
  batch = tmp_path / 'bin' / 'cifar-10-batches-bin' / 'data_batch_3.bin'
  batch.write_bytes(batch.read_bytes()[:-100])
  with pytest.raises(ValueError, match=f'{batch} is not a CIFAR-10 binary batch: .*'
                     'may be truncated'):
    cifar10_input.load(str(tmp_path / 'bin'))
  _write_python(tmp_path / 'py')
  pickled = tmp_path / 'py' / 'cifar-10-batches-py' / 'test_batch'
  pickled.write_bytes(pickled.read_bytes()[:50])
  with pytest.raises(ValueError, match=f'{pickled} is not a CIFAR-10 python batch'):
    cifar10_input.load(str(tmp_path / 'py'))


def test_labels_outside_0_to_9_name_the_file(tmp_path):
  _write_binary(tmp_path)
  batch = tmp_path / 'cifar-10-batches-bin' / 'test_batch.bin'
  records = bytearray(batch.read_bytes())
  records[0] = 12  # the first record's label byte
  batch.write_bytes(bytes(records))
  with pytest.raises(cifar10_input.DataError, match=f'^{batch} has labels outside '
                     r'0-9: \[12\] \(1 of '):
    cifar10_input.load(str(tmp_path))


def _bad_flags(tmp_path):
  """Each bad flag, and the line that must answer it."""
  a_file = tmp_path / 'a_file'
  a_file.write_text('')
  partial = tmp_path / 'partial' / 'cifar-10-batches-bin'
  partial.mkdir(parents=True)
  for name in ('data_batch_1.bin', 'data_batch_2.bin', 'data_batch_3.bin'):
    (partial / name).write_bytes(b'')
  missing = tmp_path / 'missing'
  return {
      '--batch_size=0': 'flag --batch_size=0: 0 is not a positive integer',
      '--log_frequency=0': 'flag --log_frequency=0: 0 is not a positive integer',
      '--max_steps=-1': 'flag --max_steps=-1: -1 is not a non-negative integer',
      '--eval_every=0': 'flag --eval_every=0: 0 is not a positive integer',
      '--eval_examples=-5': 'flag --eval_examples=-5: -5 is not a non-negative integer',
      '--learning_rate=-1': 'flag --learning_rate=-1.0: --learning_rate is the SGD step '
                            'size: give a number > 0, such as the default 0.05',
      f'--train_dir={a_file}': f'flag --train_dir={a_file}: --train_dir names a file',
      f'--data_dir={missing}': f'flag --data_dir={missing}: --data_dir {missing} is '
                               'not a directory',
      f'--data_dir={partial.parent}': (
          f'--data_dir {partial.parent} holds only part of the CIFAR-10 binary '
          f'files: {partial} lacks data_batch_4.bin, data_batch_5.bin, '
          'test_batch.bin. Give a directory with all six'),
  }


def test_bad_flags_and_data_dir_fail_with_one_line_naming_them(tmp_path):
  cases = _bad_flags(tmp_path)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  processes = {flag: subprocess.Popen(  # at once: each start imports TensorFlow
      [sys.executable, '-m', 'tfmon.examples.cifar10', flag,
       f'--train_dir={tmp_path / "train"}'] if not flag.startswith('--train_dir')
      else [sys.executable, '-m', 'tfmon.examples.cifar10', flag],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for flag in cases}
  for flag, expected in cases.items():
    _, stderr = processes[flag].communicate(timeout=120)
    assert processes[flag].returncode != 0
    # The last line, after what TensorFlow prints as it loads.
    assert stderr.splitlines()[-1].startswith('cifar10: ') and expected in (
        stderr.splitlines()[-1]), stderr
    assert 'Traceback' not in stderr, stderr
  assert not os.path.exists(tmp_path / 'train')  # refused before anything ran


# Runs the module as `python -m` does, with the tfmon package's own __init__
# left out: it imports TensorFlow (through tfmon.train), so under `python -m`
# TensorFlow loads before the example's first line, whatever the example does.
_WITHOUT_TFMON_INIT = """
import importlib.util, os, runpy, sys
package = os.path.join({root!r}, 'tfmon')
spec = importlib.util.spec_from_file_location(
    'tfmon', os.path.join(package, '__init__.py'), submodule_search_locations=[package])
sys.modules['tfmon'] = importlib.util.module_from_spec(spec)  # not executed
sys.argv = ['cifar10', *sys.argv[1:]]
try:
  runpy.run_module('tfmon.examples.cifar10', run_name='__main__', alter_sys=True)
finally:
  print('loaded:', sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))
"""
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_help_and_bad_flags_answer_before_tensorflow_loads(tmp_path):
  script = _WITHOUT_TFMON_INIT.format(root=_ROOT)
  for flag, expected in [('--help', None), *_bad_flags(tmp_path).items()]:
    start = time.monotonic()
    result = subprocess.run([sys.executable, '-c', script, flag], capture_output=True,
                            text=True, timeout=60)
    # Not TensorFlow's 2-3 s import (checked below); the bound allows a loaded box.
    assert time.monotonic() - start < 10.0, flag
    assert result.stdout.splitlines()[-1] == 'loaded: []', (flag, result.stdout)
    if expected is None:
      assert '--max_steps: The global step to stop at' in result.stdout
    else:
      assert result.returncode == 1
      assert result.stderr.count('\n') == 1 and result.stderr.startswith('cifar10: ')
      assert expected in result.stderr, result.stderr


def test_python_m_answers_a_bad_flag_without_importing_tensorflow():
  result = subprocess.run(
      [sys.executable, '-X', 'importtime', '-m', 'tfmon.examples.cifar10',
       '--eval_every=0'], capture_output=True, text=True, timeout=120)
  assert 'cifar10: flag --eval_every=0' in result.stderr
  assert not [line for line in result.stderr.splitlines()
              if line.startswith('import time:') and line.split('|')[-1].strip() in (
                  'tensorflow', 'keras')]


def test_max_steps_is_described_as_the_global_step_to_stop_at():
  assert 'The global step to stop at' in flags.FLAGS['max_steps'].help


@pytest.mark.slow
def test_runs_as_a_module(tmp_path):
  result = subprocess.run(
      [sys.executable, '-m', 'tfmon.examples.cifar10', f'--train_dir={tmp_path}',
       '--max_steps=4', '--batch_size=8', '--log_frequency=2', '--eval_every=2',
       '--eval_examples=16'],
      capture_output=True, text=True, timeout=300, check=True)
  assert 'step 4, loss = ' in result.stderr
  assert 'Trained 4 steps (global step 0 -> 4)' in result.stderr
  assert f'tensorboard --logdir {tmp_path}' in result.stderr
  assert os.path.exists(tmp_path / 'model.ckpt-4.index')
