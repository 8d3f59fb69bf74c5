"""Early stopping with Estimator's API, from an EvaluationHook or from event files."""

import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2

import tfmon
from tfmon.hooks import early_stopping
from tfmon.hooks.evaluation import EvaluationHook, read_eval_metrics

# The evaluation at global step s reports LOSS[s] and ACCURACY[s]: a metric that
# depends only on the global step, so where training stops is known in advance.
LOSS = {2: 5.0, 4: 3.0, 6: 4.0, 8: 3.5, 10: 3.25, 12: 6.0, 14: 6.5, 16: 7.0, 18: 8.0,
        20: 9.0}
ACCURACY = {2: 0.25, 4: 0.5, 6: 0.375, 8: 0.5, 10: 0.75, 12: 0.625, 14: 0.5,
            16: 0.5, 18: 0.5, 20: 0.5}
LAST_STEP = 20


def _evaluation(global_step, **kwargs):
  """An EvaluationHook every 2 steps reporting LOSS and ACCURACY of the global step."""
  steps = range(0, LAST_STEP + 1)
  loss = tf.constant([LOSS.get(s, 100.) for s in steps], tf.float32)
  accuracy = tf.constant([ACCURACY.get(s, 0.) for s in steps], tf.float32)
  dataset = tf.data.Dataset.range(6).batch(4)  # batches of 4 and 2

  def eval_step(batch):
    del batch
    return {'loss': tf.gather(loss, global_step), 'accuracy': tf.gather(accuracy,
                                                                         global_step)}

  return EvaluationHook(eval_step, dataset, every_n_steps=2, **kwargs)


def _train(global_step, hooks):
  """Trains (increments the global step) until a hook stops; returns the global step."""

  def step():
    global_step.assign_add(1)

  with tfmon.train.MonitoredSession(
      hooks=hooks + [tfmon.train.StopAtStepHook(last_step=LAST_STEP)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  return int(global_step.numpy())


def _every_step(**kwargs):
  return dict(run_every_secs=None, run_every_steps=1, **kwargs)


def test_stop_if_no_decrease_from_an_evaluation_hook(caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(evaluation, 'loss', 4, **_every_step())
  # Best loss 3.0 at step 4; step 8 is the first evaluation 4 steps after it.
  assert _train(global_step, [evaluation, stop]) == 8
  assert list(evaluation.results_by_step) == [2, 4, 6, 8]
  assert ('No decrease in metric "loss" for 4 steps, which is greater than or equal '
          'to max steps (4) configured for early stopping.') in caplog.text
  # As Estimator, the global step fetched with the run: the one before the step.
  assert 'Requesting early stopping at global step 7' in caplog.text


def test_min_steps_ignores_earlier_evaluations():
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(evaluation, 'loss', 4, min_steps=6,
                                                 **_every_step())
  # From step 6 on: 4.0, 3.5, 3.25 (best, step 10), 6.0, 6.5 (step 14, 4 later).
  assert _train(global_step, [evaluation, stop]) == 14


def test_stop_if_no_increase():
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_increase_hook(evaluation, 'accuracy', 6,
                                                 **_every_step())
  # Best accuracy 0.75 at step 10 (0.5 at 8 equals, not beats, 0.5 at 4); 16 is 6 later.
  assert _train(global_step, [evaluation, stop]) == 16


def test_no_stop_while_the_metric_improves_in_time():
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_increase_hook(evaluation, 'accuracy', 11,
                                                 **_every_step())
  assert _train(global_step, [evaluation, stop]) == LAST_STEP  # 20 - 10 < 11


@pytest.mark.parametrize('factory, metric_name, threshold, kwargs, stop_step, message', [
    (early_stopping.stop_if_lower_hook, 'loss', 3.3, {}, 4,
     'At step 4, metric "loss" has value 3.0 which is less than the configured '
     'threshold (3.3) for early stopping.'),
    (early_stopping.stop_if_lower_hook, 'loss', 3.3, dict(min_steps=6), 10,
     'At step 10, metric "loss" has value 3.25 which is less than the configured '
     'threshold (3.3) for early stopping.'),
    (early_stopping.stop_if_higher_hook, 'accuracy', 0.6, {}, 10,
     'At step 10, metric "accuracy" has value 0.75 which is greater than the '
     'configured threshold (0.6) for early stopping.'),
    (early_stopping.stop_if_higher_hook, 'accuracy', 0.75, {}, LAST_STEP, None),
])
def test_threshold_hooks(factory, metric_name, threshold, kwargs, stop_step, message,
                         caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = factory(evaluation, metric_name, threshold, **_every_step(**kwargs))
  assert _train(global_step, [evaluation, stop]) == stop_step
  if message is None:
    assert 'Requesting early stopping' not in caplog.text
  else:
    assert message in caplog.text


def test_checks_on_its_own_timer():
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(
      evaluation, 'loss', 4, run_every_secs=None, run_every_steps=3)
  # Checks after the runs from global steps 0, 3, 6, 9: the evaluation at 8 that
  # decides is first seen by the check of the run from 9 to 10.
  assert _train(global_step, [evaluation, stop]) == 10


def test_stop_if_no_decrease_from_the_event_files_of_an_evaluation(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step, summary_dir=str(tmp_path))
  stop = early_stopping.stop_if_no_decrease_hook(str(tmp_path / 'eval'), 'loss', 4,
                                                 **_every_step())
  assert _train(global_step, [evaluation, stop]) == 8
  assert 'No decrease in metric "loss" for 4 steps' in caplog.text
  assert read_eval_metrics(tmp_path / 'eval') == {
      step: {'loss': LOSS[step], 'accuracy': ACCURACY[step]} for step in (2, 4, 6, 8)}


def _write_estimator_eval_dir(eval_dir, losses_by_step):
  """Event files as Estimator's evaluation wrote them: v1 `simple_value` summaries."""
  os.makedirs(eval_dir)
  path = os.path.join(eval_dir, 'events.out.tfevents.1500000000.evaluator')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(event_pb2.Event(wall_time=1.5e9, file_version='brain.Event:2')
                 .SerializeToString())
    for step, loss in losses_by_step.items():
      summary = summary_pb2.Summary(value=[
          summary_pb2.Summary.Value(tag='loss', simple_value=loss),
          summary_pb2.Summary.Value(tag='accuracy', simple_value=0.5)])
      writer.write(event_pb2.Event(wall_time=1.5e9, step=step, summary=summary)
                   .SerializeToString())


_ESTIMATOR_LOSSES = {10: 1.0, 20: 0.75, 30: 0.875, 40: 0.8125, 50: 0.9375}


@pytest.mark.parametrize('max_steps_without_decrease, stop_step', [
    (30, 1),           # 50 - 20 >= 30: stop at the first check, after the first run
    (31, LAST_STEP),   # 50 - 20 < 31: never
])
def test_reads_an_estimator_eval_dir(tmp_path, caplog, max_steps_without_decrease,
                                     stop_step):
  caplog.set_level(logging.INFO)
  eval_dir = str(tmp_path / 'eval')
  _write_estimator_eval_dir(eval_dir, _ESTIMATOR_LOSSES)
  assert read_eval_metrics(eval_dir) == {
      step: {'loss': loss, 'accuracy': 0.5} for step, loss in _ESTIMATOR_LOSSES.items()}
  global_step = tfmon.train.get_or_create_global_step()
  # Estimator's call, with eval_dir instead of an estimator.
  stop = early_stopping.stop_if_no_decrease_hook(
      None, 'loss', max_steps_without_decrease, eval_dir=eval_dir,
      **_every_step())
  assert _train(global_step, [stop]) == stop_step
  if stop_step == 1:
    assert ('No decrease in metric "loss" for 30 steps, which is greater than or '
            'equal to max steps (30) configured for early stopping.') in caplog.text
    assert 'Requesting early stopping at global step 0' in caplog.text


def test_reads_what_is_complete_of_a_file_being_written(tmp_path):
  eval_dir = str(tmp_path / 'eval')
  _write_estimator_eval_dir(eval_dir, _ESTIMATOR_LOSSES)
  path = os.path.join(eval_dir, os.listdir(eval_dir)[0])
  with open(path, 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:
    f.write(data[:-7])  # the last event is half written
  assert read_eval_metrics(eval_dir) == {
      step: {'loss': loss, 'accuracy': 0.5}
      for step, loss in _ESTIMATOR_LOSSES.items() if step != 50}


def test_a_missing_directory_has_no_results(tmp_path):
  assert read_eval_metrics(tmp_path / 'not_yet') == {}
  global_step = tfmon.train.get_or_create_global_step()
  stop = early_stopping.stop_if_lower_hook(str(tmp_path / 'not_yet'), 'loss', 1.0,
                                           **_every_step())
  assert _train(global_step, [stop]) == LAST_STEP


def test_make_early_stopping_hook_with_a_custom_predicate():
  global_step = tfmon.train.get_or_create_global_step()
  calls = []

  def should_stop():
    calls.append(int(global_step.numpy()))
    return len(calls) == 3

  stop = early_stopping.make_early_stopping_hook(should_stop, run_every_secs=None,
                                                 run_every_steps=5)
  # Checked after the runs from global steps 0, 5 and 10 (then at 6, 11 and stops).
  assert _train(global_step, [stop]) == 11
  assert calls == [1, 6, 11]


def test_unknown_metric_from_an_evaluation_hook_fails_at_session_creation():
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(evaluation, 'los', 4, **_every_step())
  with pytest.raises(ValueError, match=r"watches metric 'los', but EvaluationHook "
                     r"'eval' reports only \['accuracy', 'loss'\]"):
    tfmon.train.MonitoredSession(hooks=[evaluation, stop])


def test_warns_when_the_evaluation_hook_comes_after_it(caplog):
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(evaluation, 'loss', 4, **_every_step())
  # Each check sees evaluations up to the previous run: the one at 8, one run late.
  assert _train(global_step, [stop, evaluation]) == 9
  assert ("The early stopping hook was set up before its EvaluationHook 'eval': "
          'place the EvaluationHook in the same session') in caplog.text


def test_unknown_metric_in_event_files_fails_when_read(tmp_path):
  eval_dir = str(tmp_path / 'eval')
  _write_estimator_eval_dir(eval_dir, _ESTIMATOR_LOSSES)
  global_step = tfmon.train.get_or_create_global_step()
  stop = early_stopping.stop_if_higher_hook(eval_dir, 'auc', 0.9, **_every_step())
  with pytest.raises(ValueError, match=r"watches metric 'auc', but the evaluation at "
                     r"global step 10 from event files in .*/eval has only "
                     r"\['accuracy', 'loss'\]"):
    _train(global_step, [stop])


def test_min_steps_skip_evaluations_without_the_metric(tmp_path):
  eval_dir = str(tmp_path / 'eval')
  _write_estimator_eval_dir(eval_dir, _ESTIMATOR_LOSSES)
  with tf.summary.create_file_writer(eval_dir).as_default():
    tf.summary.scalar('auc', 0.95, step=60)  # a TF2 scalar, only at step 60
  global_step = tfmon.train.get_or_create_global_step()
  stop = early_stopping.stop_if_higher_hook(eval_dir, 'auc', 0.9, min_steps=60,
                                            **_every_step())
  assert _train(global_step, [stop]) == 1
  assert read_eval_metrics(eval_dir)[60] == {'auc': pytest.approx(0.95)}


def test_argument_errors(tmp_path):
  eval_dir = str(tmp_path)
  with pytest.raises(ValueError, match=r'^Only one of `run_every_secs` and '
                     r'`run_every_steps` must be set\. .*pass run_every_secs=None'):
    early_stopping.stop_if_no_decrease_hook(eval_dir, 'loss', 10, run_every_steps=10)
  with pytest.raises(ValueError, match='One of `run_every_secs` and `run_every_steps` '
                     'must be set'):
    early_stopping.stop_if_lower_hook(eval_dir, 'loss', 1.0, run_every_secs=None)
  with pytest.raises(ValueError, match=r'`run_every_steps` must be a non-negative '
                     r'number \(0: every run\); got -1'):
    early_stopping.stop_if_lower_hook(eval_dir, 'loss', 1.0, run_every_secs=None,
                                      run_every_steps=-1)
  with pytest.raises(TypeError, match=r'reads evaluation results from an '
                     r'EvaluationHook or a directory .* got 3 of type int'):
    early_stopping.stop_if_higher_hook(3, 'accuracy', 0.9)
  with pytest.raises(TypeError, match=r'got None of type NoneType'):
    early_stopping.stop_if_higher_hook(None, 'accuracy', 0.9)
  global_step = tfmon.train.get_or_create_global_step()
  with pytest.raises(ValueError, match='got both an evaluation source'):
    early_stopping.stop_if_higher_hook(_evaluation(global_step), 'accuracy', 0.9,
                                       eval_dir=eval_dir)
  with pytest.raises(TypeError, match='metric_name must be a metric name'):
    early_stopping.stop_if_higher_hook(eval_dir, None, 0.9)
  with pytest.raises(TypeError, match="threshold must be a number; got '0.9'"):
    early_stopping.stop_if_higher_hook(eval_dir, 'accuracy', '0.9')
  with pytest.raises(ValueError, match='max_steps_without_decrease must be a '
                     'non-negative number of global steps; got -1'):
    early_stopping.stop_if_no_decrease_hook(eval_dir, 'loss', -1)
  with pytest.raises(ValueError, match='max_steps_without_increase must be a '
                     "non-negative number of global steps; got '10'"):
    early_stopping.stop_if_no_increase_hook(eval_dir, 'accuracy', '10')
  with pytest.raises(ValueError, match='min_steps must be a non-negative number'):
    early_stopping.stop_if_no_increase_hook(eval_dir, 'accuracy', 10, min_steps=-1)
  with pytest.raises(TypeError, match='`should_stop_fn` must be callable'):
    early_stopping.make_early_stopping_hook(object())  # Estimator's estimator argument


def test_values_estimator_accepts_are_accepted():
  # Ported code writes step counts as 1e4 and checks on every run with 0 seconds,
  # as Estimator's own tests do.
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _evaluation(global_step)
  stop = early_stopping.stop_if_no_decrease_hook(evaluation, 'loss', 4e0,
                                                 min_steps=0., run_every_secs=0)
  assert _train(global_step, [evaluation, stop]) == 8  # as with run_every_steps=1


def test_importing_tfmon_leaves_tensorboards_event_file_loader_unloaded():
  # The loader brings TensorBoard's TF stub (and boto3 where it is installed):
  # ~90 ms at every job's start, for reading eval event files that few jobs do.
  code = ('import sys, tfmon\n'
          "print('tensorboard.backend.event_processing.event_file_loader' in sys.modules)\n")
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split()[-1] == 'False'
