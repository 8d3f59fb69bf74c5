"""benchmarks/compare.py on a few MLP steps: every variant trains every round,
stops at its last step and does its duties (scaled down to fit 14 steps)."""

import glob
import logging
import os

from absl import logging as absl_logging
import pytest

from benchmarks import compare
from tests import event_files
import tfmon

# 2 warm-up steps, then 3 rounds of 4: 14 steps; a checkpoint at step 10,
# summaries and log lines every 2 steps, fused variants 2 steps a call.
_DUTIES = compare.Duties(checkpoint_steps=10, summary_steps=2, log_steps=2, fused_steps=2)
_TFMON_FUSED = compare.TFMON_FUSED.format(fused=2)
_KERAS_FUSED = compare.KERAS_FUSED.format(fused=2)
_KERAS_BARE = compare.KERAS_BARE.format(fused=2)


class _Messages(logging.Handler):

  def __init__(self):
    super().__init__()
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


@pytest.fixture(scope='module')
def comparison(tmp_path_factory):
  """The results by variant name, and what the in-process variants logged."""
  messages = _Messages()
  absl_logger = logging.getLogger('absl')
  absl_logger.addHandler(messages)
  tf_logger = logging.getLogger('tensorflow')  # tfmon's lines, as v1's hooks'
  tf_logger.addHandler(messages)
  # Restore the logger's own level, not absl's verbosity: setting a verbosity
  # pins the level, which would hide INFO lines from later tests' caplog.
  level = absl_logger.level
  absl_logging.set_verbosity(absl_logging.INFO)
  try:
    results = compare.measure(
        'mlp', rounds=3, steps=4, warmup_steps=2,
        directory=str(tmp_path_factory.mktemp('compare')), duties=_DUTIES)
  finally:
    absl_logger.setLevel(level)
    absl_logger.removeHandler(messages)
    tf_logger.removeHandler(messages)
  return {result.name: result for result in results}, messages.messages


def _ran(results):
  return {name: result for name, result in results.items() if not result.unavailable}


def _tags(directory):
  tags = event_files.events(directory).Tags()
  return set(tags['tensors'] + tags['scalars'])


def test_every_variant_runs_every_round_at_a_positive_rate(comparison):
  results, _ = comparison
  assert list(results) == [compare.PLAIN, compare.TFMON, _TFMON_FUSED, compare.TF1,
                           compare.TF1_BARE, compare.KERAS, _KERAS_FUSED, _KERAS_BARE]
  for name, result in _ran(results).items():
    assert len(result.rates) == 3 and min(result.rates) > 0, name
    assert len(result.ratios) == 3, name
  assert results[compare.PLAIN].ratios == [1.0] * 3
  fused = results[_TFMON_FUSED]
  assert fused.unavailable in (None, 'steps_per_loop not available')


def test_tensorflow_checkpoints_include_the_timed_one(comparison):
  results, _ = comparison
  for name in (compare.PLAIN, compare.TFMON, _TFMON_FUSED, compare.TF1):
    if name in _ran(results):
      steps = compare.checkpoint_steps(results[name].directory)
      assert 10 in steps and steps[-1] == 14, (name, steps)  # timed, then at the end


def test_keras_checkpoints_weights_only_on_its_step_count(comparison):
  results, _ = comparison
  for name in (compare.KERAS, _KERAS_FUSED):
    # Epoch 3 of 4 (one fit per round, after the warm-up's) at its 4th step: step 10.
    weights = glob.glob(os.path.join(results[name].directory, '*.weights.h5'))
    assert [os.path.basename(path) for path in weights] == [
        'weights-003-000004.weights.h5'], name
  assert results[_KERAS_BARE].directory is None


def test_summaries_hold_the_loss_and_the_step_rate(comparison):
  results, _ = comparison
  for name in (compare.PLAIN, compare.TFMON, _TFMON_FUSED, compare.TF1):
    if name in _ran(results):
      assert {'loss', 'global_step/sec'} <= _tags(results[name].directory), name
  for name in (compare.KERAS, _KERAS_FUSED):
    directory = results[name].directory
    assert 'batch_loss' in _tags(os.path.join(directory, 'tensorboard', 'train')), name
    assert 'global_step/sec' in _tags(os.path.join(directory, 'steps')), name


def test_in_process_variants_log_the_loss_and_step_rate(comparison):
  results, messages = comparison
  # Plain and Keras log at steps 2, 4, ..., 14; LoggingTensorHook at its own
  # trigger steps: each at least 6 times.
  logging_variants = len({compare.PLAIN, compare.TFMON, _TFMON_FUSED, compare.KERAS,
                          _KERAS_FUSED} & set(_ran(results)))
  assert sum(m.startswith('loss = ') for m in messages) >= 6 * logging_variants
  assert sum(m.startswith('global_step/sec: ') for m in messages) >= 6 * logging_variants


def test_a_session_without_steps_per_loop_makes_the_fused_variant_unavailable(
    tmp_path, monkeypatch):
  def without_fusion(checkpoint_dir, checkpoint, save_checkpoint_steps,
                     save_summaries_steps, log_step_count_steps, hooks):
    del checkpoint_dir, checkpoint, save_checkpoint_steps  # the v1 arguments only
    del save_summaries_steps, log_step_count_steps, hooks

  monkeypatch.setattr(tfmon.train, 'MonitoredTrainingSession', without_fusion)
  with pytest.raises(compare.Unavailable, match='steps_per_loop not available'):
    compare.TfmonSession('mlp', str(tmp_path), 10, _DUTIES, steps_per_loop=2)


def test_targets_compare_same_round_rates():
  fused = compare.TFMON_FUSED.format(fused=100)
  keras = compare.KERAS_BARE.format(fused=100)
  results = [compare.Result(compare.PLAIN, [100, 200, 100]),
             compare.Result(compare.TFMON, [98, 150, 97]),
             compare.Result(compare.TF1, [100, 100, 99]),
             compare.Result(fused, [330, 500, 340]),
             # Faster in its median rate, slower in two rounds of three.
             compare.Result(keras, [340, 800, 350])]
  assert compare.targets('mlp', results) == [
      '(b) / (d) = 0.980 (target >= 1.0): NOT met',
      '(c) / (e) = 0.971 (target >= 1.0): NOT met']
  assert compare.targets('cnn', results) == [
      '(b) / (a) = 0.970 (target >= 0.98): NOT met',
      '(c) / (a) = 3.300 (target >= 1.0): met']
