"""TensorFlow's own tf.compat.v1.train hook objects given to tfmon sessions run as
tfmon's hooks with the same configuration, or are refused at session creation
naming the replacement (SPEC section 7): one test per built-in."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests import event_files

v1 = tf.compat.v1.train


@pytest.fixture(autouse=True)
def _info_logs(caplog):
  caplog.set_level(logging.INFO)


def _counting_step():
  """A step adding one to the global step; returns it and loss = step / 4."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    value = global_step.read_value()
    tf.summary.scalar('loss', tf.cast(value, tf.float32) / 4)
    return {'step': value, 'loss': tf.cast(value, tf.float32) / 4}

  return global_step, step


def _train(hooks, runs, step=None, **session_kwargs):
  """Runs `step` up to `runs` times in a MonitoredSession (or, with session
  arguments, a MonitoredTrainingSession); returns how many runs ran."""
  step = step or _counting_step()[1]
  if session_kwargs:
    sess = tfmon.train.MonitoredTrainingSession(hooks=hooks, **session_kwargs)
  else:
    sess = tfmon.train.MonitoredSession(hooks=hooks)
  done = 0
  with sess:
    while done < runs and not sess.should_stop():
      sess.run(tfmon.train.op(step))
      done += 1
  return done


def _logged(caplog, prefix=''):
  return [r.getMessage() for r in caplog.records
          if r.name == 'tensorflow' and r.getMessage().startswith(prefix)]


def _graph_tensor(name):
  with tf.Graph().as_default():
    return tf.constant(1.0, name=name)


def test_stop_at_step_hook():
  global_step, step = _counting_step()
  assert _train([v1.StopAtStepHook(last_step=5)], runs=100, step=step) == 5
  # num_steps counts from the session's start; in MonitoredTrainingSession too.
  assert _train([], runs=100, step=step, chief_only_hooks=[
      v1.StopAtStepHook(num_steps=3)], log_step_count_steps=None) == 3
  assert global_step.numpy() == 8


def test_logging_tensor_hook(caplog):
  hooks = [v1.LoggingTensorHook({'z': 'step', 'a': 'loss'}, every_n_iter=2),
           v1.LoggingTensorHook(['step', 'loss'], every_n_iter=3),  # list order
           v1.LoggingTensorHook(['step'], at_end=True)]
  _train(hooks, runs=4)
  lines = [line.split(' (')[0] for line in _logged(caplog) if ' = ' in line]
  assert lines == ['a = 0.25, z = 1', 'step = 1, loss = 0.25', 'a = 0.75, z = 3',
                   'step = 4, loss = 1.0', 'step = 4']
  assert _logged(caplog, 'Running tf.compat.v1.train.LoggingTensorHook as '
                 'tfmon.train.LoggingTensorHook with the same configuration.')


def test_logging_tensor_hook_with_a_graph_tensor_is_refused_naming_the_fix():
  _counting_step()
  hook = v1.LoggingTensorHook({'loss': _graph_tensor('loss')}, every_n_iter=1)
  with pytest.raises(TypeError, match=(
      r"^hooks\[0\] is tf.compat.v1.train.LoggingTensorHook .*, which a tfmon "
      r"session runs as tfmon.train.LoggingTensorHook with the same configuration, "
      r"but its tensors holds the graph tensor 'loss:0'.*\{'loss': value\}.*'loss'")):
    tfmon.train.MonitoredSession(hooks=[hook])


def test_step_counter_hook(tmp_path):
  hook = v1.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path))
  _train([hook], runs=5)
  steps, rates = event_files.scalars(event_files.events(tmp_path), 'global_step/sec')
  assert steps == [3, 5] and all(rate > 0 for rate in rates)


def test_checkpoint_saver_hook(tmp_path):
  global_step, step = _counting_step()
  weight = tf.Variable(2.0, name='weight')
  listener = _Listener()
  hook = v1.CheckpointSaverHook(str(tmp_path), save_steps=3, saver=None,
                                checkpoint_basename='my.ckpt', listeners=[listener])
  _train([hook], runs=4, step=step, checkpoint_dir=str(tmp_path),
         checkpoint={'weight': weight}, save_checkpoint_secs=None,
         save_summaries_steps=None, log_step_count_steps=None)
  assert tf.train.latest_checkpoint(tmp_path).endswith('my.ckpt-4')
  assert sorted(name for name in os.listdir(tmp_path) if name.endswith('.index')) == [
      'my.ckpt-0.index', 'my.ckpt-3.index', 'my.ckpt-4.index']
  assert listener.saved == [0, 3, 4]  # the TF hook's listeners are called
  del global_step


class _Listener(tfmon.train.CheckpointSaverListener):

  def begin(self):
    self.saved = []

  def after_save(self, session, global_step_value):
    self.saved.append(int(global_step_value))


def test_checkpoint_saver_hook_with_a_tf1_saver_is_refused_naming_the_fix(tmp_path):
  _counting_step()
  hook = v1.CheckpointSaverHook(str(tmp_path), save_steps=1,
                                saver=v1.Saver([tf.Variable(1.0)]))
  with pytest.raises(TypeError, match=r"chief_only_hooks\[0\] is tf.compat.v1.train."
                     r"CheckpointSaverHook .* its saver is a TF1 Saver .*"
                     r"checkpoint=\{'model': model"):
    tfmon.train.MonitoredTrainingSession(chief_only_hooks=[hook])


def test_summary_saver_hook(tmp_path):
  global_step, step = _counting_step()
  _train([v1.SummarySaverHook(save_steps=2, output_dir=str(tmp_path / 'own'),
                              scaffold=v1.Scaffold())],  # v1's default: merge_all
         runs=5, step=step)
  global_step.assign(0)
  _train([v1.SummarySaverHook(save_steps=3, output_dir=str(tmp_path / 'extra'),
                              summary_op=lambda: tf.summary.scalar('one', 1.0))],
         runs=5, step=step)
  own = event_files.events(tmp_path / 'own')
  assert event_files.steps(own, 'loss') == [1, 3, 5]
  assert event_files.steps(event_files.events(tmp_path / 'extra'), 'one') == [1, 4]


def test_summary_saver_hook_with_a_summary_tensor_is_refused_naming_the_fix(tmp_path):
  _counting_step()
  hook = v1.SummarySaverHook(save_steps=1, output_dir=str(tmp_path),
                             summary_op=_graph_tensor('merged'))
  with pytest.raises(TypeError, match='its summary_op .* is a TF1 summary tensor.*'
                     'leave summary_op out'):
    tfmon.train.MonitoredSession(hooks=[hook])


def test_nan_tensor_hook():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    return {'loss': tf.sqrt(tf.cast(3 - global_step.read_value(), tf.float32))}

  with pytest.raises(tfmon.train.NanLossDuringTrainingError):
    _train([v1.NanTensorHook('loss')], runs=10, step=step)
  assert global_step.numpy() == 4
  assert _train([v1.NanTensorHook('loss', fail_on_nan_loss=False)], runs=10,
                step=step) == 1  # stops, without raising, at the NaN step


def test_feed_fn_hook():
  global_step = tfmon.train.get_or_create_global_step()
  seen = tf.Variable(0.0)

  def step(x):
    seen.assign_add(x)
    global_step.assign_add(1)

  _train([v1.FeedFnHook(lambda: {'x': 2.5})], runs=2, step=step)
  assert seen.numpy() == 5.0


def test_final_ops_hook_fills_the_tf_hooks_values():
  global_step, step = _counting_step()
  hook = v1.FinalOpsHook({'step': global_step, 'double': lambda: global_step * 2})
  _train([hook], runs=3, step=step)
  assert hook.final_ops_values == {'step': 3, 'double': 6}  # the object you hold


def test_global_step_waiter_hook(caplog):
  global_step, step = _counting_step()
  global_step.assign(7)
  _train([v1.GlobalStepWaiterHook(wait_until_step=7)], runs=1, step=step)
  assert _logged(caplog, 'Waiting for global step 7 before starting training.')


def test_profiler_hook(tmp_path):
  _counting_step()
  with tf.Graph().as_default():  # TF's ProfilerHook makes a FileWriter: graph only
    hook = v1.ProfilerHook(save_steps=3, output_dir=str(tmp_path))
  _train([hook], runs=7)
  profiled = sorted(int(run.rsplit('_step_', 1)[1]) for run in
                    os.listdir(tmp_path / 'plugins' / 'profile'))
  assert profiled == [3, 6]  # v1's rule, as tests/hooks/test_profiler.py


def test_a_subclass_of_a_hook_run_by_a_tf1_saver_is_refused_naming_the_replacement(
    tmp_path):

  class MySaver(v1.CheckpointSaverHook):
    pass

  _counting_step()
  with pytest.raises(TypeError, match=r'hooks\[1\] is .*, a subclass of '
                     r'tf.compat.v1.train.CheckpointSaverHook, but its methods need '
                     r'a TF1 graph\. Subclass tfmon.train.CheckpointSaverHook instead'):
    tfmon.train.MonitoredSession(hooks=[tfmon.train.StopAtStepHook(last_step=1),
                                        MySaver(str(tmp_path), save_steps=1)])


class _ArraySaver(v1.LoggingTensorHook):
  """Patterned on public subclasses: after_run keeps the values of the runs it
  triggers on, reading TF's private state, instead of logging them."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.saved = []

  def after_run(self, run_context, run_values):
    if self._should_trigger:
      self._timer.update_last_triggered_step(self._iter_count)
      self.saved.append((self._iter_count, run_values.results))
    self._iter_count += 1


class _NotAtFirst(v1.LoggingTensorHook):
  """Patterned on evaluation loggers: begin() calls TF's, then moves its timer."""

  def begin(self):
    super().begin()
    self._timer.update_last_triggered_step(0)


def test_a_logging_tensor_hook_subclass_runs_as_in_tf1(caplog):
  global_step, step = _counting_step()
  saver = _ArraySaver({'loss': 'loss', 'step': global_step,
                       'double': lambda: global_step * 2}, every_n_iter=2)
  logger = _NotAtFirst(['step'], every_n_iter=2, at_end=True)
  _train([saver, logger], runs=5, step=step)
  # Names come from the run's step; variables are read before it, and a hook's
  # step function runs after it, as SPEC section 2 says.
  assert saver.saved == [(0, {'loss': 0.25, 'step': 0, 'double': 2}),
                         (2, {'loss': 0.75, 'step': 2, 'double': 6}),
                         (4, {'loss': 1.25, 'step': 4, 'double': 10})]
  assert type(saver).__name__ == '_ArraySaver' and isinstance(saver, _ArraySaver)
  # Its timer moved to 0: the first run does not log; at_end does.
  assert [line.split(' (')[0] for line in _logged(caplog, 'step = ')] == [
      'step = 3', 'step = 5', 'step = 5']


class _StopAtStepReporting(v1.StopAtStepHook):
  """Patterned on public subclasses: reports whether it stopped, and when."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.stop_requested = False
    self.started_at = None

  def after_create_session(self, session, coord):
    self.started_at = int(session.run(self._global_step_tensor))
    super().after_create_session(session, coord)

  def after_run(self, run_context, run_values):
    super().after_run(run_context, run_values)
    self.stop_requested = run_context.stop_requested


def test_a_stop_at_step_hook_subclass_runs_as_in_tf1():
  global_step, step = _counting_step()
  global_step.assign(4)
  hook = _StopAtStepReporting(num_steps=3)
  assert _train([hook], runs=100, step=step) == 3
  assert (hook.started_at, hook._last_step, hook.stop_requested) == (4, 7, True)
  # Run again by a second session, it stops at once, as TF's would.
  assert _train([hook], runs=100, step=step) == 1


def test_a_step_counter_hook_subclass_writes_its_rate(tmp_path, caplog):

  class Reporting(v1.StepCounterHook):

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
      super()._log_and_record(elapsed_steps, elapsed_time, global_step)
      self.last = global_step

  hook = Reporting(every_n_steps=2, output_dir=str(tmp_path))
  _train([hook], runs=5)
  assert hook.last == 5
  steps, rates = event_files.scalars(event_files.events(tmp_path), 'global_step/sec')
  assert steps == [3, 5] and all(rate > 0 for rate in rates)
  assert len(_logged(caplog, 'global_step/sec: ')) == 2


def test_a_global_step_waiter_hook_subclass_waits_as_in_tf1(caplog):

  class Counting(v1.GlobalStepWaiterHook):

    def before_run(self, run_context):
      self.waited = not self._worker_is_started
      return super().before_run(run_context)

  global_step, step = _counting_step()
  global_step.assign(3)
  hook = Counting(wait_until_step=3)
  _train([hook], runs=2, step=step)
  assert hook.waited is False  # started at the first run, which waited
  assert _logged(caplog, 'Waiting for global step 3 before starting training.')


def test_a_subclass_with_a_graph_tensor_is_refused_naming_the_fix():

  class Mine(v1.LoggingTensorHook):
    pass

  _counting_step()
  with pytest.raises(TypeError, match=r"a subclass of tf.compat.v1.train."
                     r"LoggingTensorHook, but its tensors holds the graph tensor "
                     r"'loss:0'"):
    tfmon.train.MonitoredSession(hooks=[
        Mine({'loss': _graph_tensor('loss')}, every_n_iter=1)])


def test_a_subclass_needing_no_graph_runs_as_it_is():

  class Feeds(v1.FeedFnHook):
    pass

  global_step = tfmon.train.get_or_create_global_step()
  total = tf.Variable(0.0)

  def step(x):
    total.assign_add(x)
    global_step.assign_add(1)

  _train([Feeds(lambda: {'x': np.float32(1.5)})], runs=2, step=step)
  assert total.numpy() == 3.0
