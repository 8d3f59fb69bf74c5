"""SummarySaverHook and StepCounterHook, read back with TensorBoard's own reader."""

import glob
import logging
import os

import pytest
from tensorboard.backend.event_processing import event_accumulator
import tensorflow as tf

import tfmon
from tests import event_files
from tests.event_files import events as _events, steps as _steps, values as _values
from tests.training import Job, forget_global_step


class _TracedLosses(Job):
  """The Job, counting traces of its step and keeping every loss by global step."""

  def __init__(self):
    super().__init__()
    self.traces = 0

  def step(self):
    self.traces += 1
    return super().step()


def test_records_first_run_then_every_n_steps_with_post_step_global_step(tmp_path):
  job = _TracedLosses()
  hook = tfmon.train.SummarySaverHook(save_steps=2, output_dir=str(tmp_path))
  losses = {}
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for step in range(1, 9):
      losses[step] = float(sess.run(job.step)['loss'])
  events = _events(tmp_path)
  assert _steps(events, 'loss') == [1, 3, 5, 7]
  assert _values(events, 'loss') == pytest.approx([losses[s] for s in (1, 3, 5, 7)])
  assert job.traces == 1  # recording and non-recording runs share one trace
  assert events.Tags()['graph']  # the compiled step, for the Graphs tab


class _DieAfter(tfmon.train.SessionRunHook):
  """Raises after the run reaching `step`: the job ends as a killed one does,
  without end() and so without a final checkpoint."""

  def __init__(self, step):
    self._step = step

  def after_run(self, run_context, run_values):
    if tfmon.train.global_step_after_run(run_context,
                                         tfmon.train.get_global_step()) == self._step:
      raise RuntimeError('killed')


def test_a_resumed_job_replaces_what_its_dead_run_wrote_after_its_checkpoint(tmp_path):
  duties = dict(checkpoint_dir=str(tmp_path), save_checkpoint_steps=6,
                save_summaries_steps=1, log_step_count_steps=None)
  with pytest.raises(RuntimeError, match='killed'):
    Job().train(12, hooks=[_DieAfter(10)], **duties)  # checkpoints at 0 and 6
  forget_global_step()
  resumed = Job(init_seed=1)
  losses = resumed.train(12, **duties)  # from step 6: steps 7 to 12
  # Steps 7-10 of the dead run are gone: TensorBoard purges them on the resumed
  # session's SessionLog.START at step 7, as it did for v1's hook.
  steps, values = event_files.served(tmp_path, 'loss')
  assert steps == list(range(1, 13))
  assert values[6:] == pytest.approx(losses)


def _graph_events(logdir):
  return sum(event.HasField('graph_def')
             for path in glob.glob(os.path.join(str(logdir), 'events.out.tfevents.*'))
             for event in tf.compat.v1.train.summary_iterator(path))


def _assert_one_graph(logdir, caplog):
  """TensorBoard's loader finds a graph in `logdir`, and only one."""
  caplog.clear()
  accumulator = event_accumulator.EventAccumulator(str(logdir))
  accumulator.Reload()
  assert accumulator.Tags()['graph']
  assert 'more than one graph event' not in caplog.text
  assert _graph_events(logdir) == 1


def _write_graph_as_an_earlier_process(logdir):
  writer = tf.summary.create_file_writer(str(logdir))
  with writer.as_default():
    tf.summary.graph(tf.Graph())
  writer.close()


def test_the_graph_is_written_once_per_directory_also_when_the_job_resumes(
    tmp_path, caplog):
  caplog.set_level(logging.WARNING)
  duties = dict(checkpoint_dir=str(tmp_path / 'job'), save_checkpoint_steps=2,
                save_summaries_steps=1, log_step_count_steps=None)
  Job().train(2, **duties)
  forget_global_step()
  Job().train(4, **duties)  # resumed from step 2, in this process
  _assert_one_graph(tmp_path / 'job', caplog)

  # Resumed by a new process: the directory holds the first process's graph.
  _write_graph_as_an_earlier_process(tmp_path / 'logs')
  forget_global_step()
  Job().train(6, summary_dir=str(tmp_path / 'logs'), **duties)
  _assert_one_graph(tmp_path / 'logs', caplog)
  # Resumed into a directory without event files: it gets the graph.
  forget_global_step()
  Job().train(8, summary_dir=str(tmp_path / 'new_logs'), **duties)
  _assert_one_graph(tmp_path / 'new_logs', caplog)
  # A job started anew writes its own graph, whatever the directory holds.
  _write_graph_as_an_earlier_process(tmp_path / 'old_logs')
  forget_global_step()
  Job().train(2, checkpoint_dir=str(tmp_path / 'new_job'),
              summary_dir=str(tmp_path / 'old_logs'), save_summaries_steps=1)
  assert _graph_events(tmp_path / 'old_logs') == 2


@pytest.mark.parametrize('steps_per_loop', [1, 4])
def test_summary_op_callables_are_recorded_on_trigger_steps(tmp_path, steps_per_loop):
  job = Job()
  summary_op = lambda: tf.summary.scalar('bias_mean', tf.reduce_mean(  # pylint: disable=g-long-lambda
      job.model.layers[-1].bias))
  hook = tfmon.train.SummarySaverHook(save_steps=3, output_dir=str(tmp_path),
                                      summary_op=summary_op)
  # Stamped as the step's own summaries: a callable runs after the step (after
  # a fused run's loop), and the global step has moved on since.
  with tfmon.train.MonitoredSession(
      hooks=[hook, tfmon.train.StopAtStepHook(last_step=7)],
      steps_per_loop=steps_per_loop) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step))
  events = _events(tmp_path)
  assert _steps(events, 'bias_mean') == [1, 4, 7]
  assert _steps(events, 'loss') == [1, 4, 7]
  assert _values(events, 'bias_mean')[-1] == pytest.approx(
      float(tf.reduce_mean(job.model.layers[-1].bias)))


def test_summary_saver_argument_errors(tmp_path):
  with pytest.raises(ValueError, match='^Exactly one of scaffold or summary_op must '
                     'be provided.$'):
    tfmon.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path),
                                 scaffold=tfmon.train.Scaffold(),
                                 summary_op=lambda: None)
  with pytest.raises(ValueError, match='needs output_dir or summary_writer'):
    tfmon.train.SummarySaverHook(save_steps=1)
  with pytest.raises(TypeError, match='summary_op 3 is not callable'):
    tfmon.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=3)
  with pytest.raises(TypeError, match='must be a tf.summary.SummaryWriter'):
    tfmon.train.SummarySaverHook(save_steps=1, summary_writer=str(tmp_path))


@pytest.mark.parametrize('steps_per_loop', [1, 4])
def test_step_counter_records_and_logs_global_step_per_sec(tmp_path, caplog,
                                                           steps_per_loop):
  caplog.set_level(logging.INFO)
  job = Job()
  hook = tfmon.train.StepCounterHook(every_n_steps=5, output_dir=str(tmp_path))
  written = []
  with tfmon.train.MonitoredSession(
      hooks=[hook, tfmon.train.StopAtStepHook(last_step=22)],
      steps_per_loop=steps_per_loop) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step))
      tfmon.summaries.writer_for(str(tmp_path)).flush()
      on_disk = _events(tmp_path)
      written.append((int(job.global_step.numpy()),
                      event_files.scalars(on_disk, 'global_step/sec')[0]
                      if 'global_step/sec' in on_disk.Tags()['scalars'] else []))
  # v1: the first run starts the clock. As v1 wrote it: a simple_value, which
  # TensorBoard's EventAccumulator.Scalars and summary_iterator loops read.
  steps, rates = event_files.scalars(_events(tmp_path), 'global_step/sec')
  assert steps == [6, 11, 16, 21]
  assert all(rate > 0 for rate in rates)
  assert sorted(event_files.simple_values(tmp_path, 'global_step/sec')) == steps
  assert caplog.text.count('global_step/sec: ') == 4
  # Each rate is written by the hook at its trigger step, not one interval later.
  assert [(step, rates) for step, rates in written if step in (10, 11, 16)] == [
      (10, [6]), (11, [6, 11]), (16, [6, 11, 16])]


def test_step_counter_warns_when_the_global_step_does_not_increase(caplog):
  tfmon.train.get_or_create_global_step()
  with tfmon.train.MonitoredSession(
      hooks=[tfmon.train.StepCounterHook(every_n_steps=100)]) as sess:
    for _ in range(3):
      sess.run(lambda: tf.constant(0))
  assert 'It seems that global step (tf.train.get_global_step) has not been ' \
         'increased. Current value (could be stable): 0 vs previous value: 0' in caplog.text


def test_step_counter_argument_errors():
  with pytest.raises(ValueError, match='^exactly one of every_n_steps and '
                     'every_n_secs should be provided.$'):
    tfmon.train.StepCounterHook(every_n_steps=None, every_n_secs=None)



def _step_counter_subclass(base):
  """A subclass written against TF's StepCounterHook: it reads TF's private
  names (TPUEstimator calls `_set_steps_per_run`) and keeps what it logs."""

  class Recording(base):

    def __init__(self, **kwargs):
      super().__init__(**kwargs)
      self.steps_per_run_given = self._steps_per_run
      self._set_steps_per_run(1)
      self.writer = self._summary_writer
      self.logged = []

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
      self.logged.append((elapsed_steps, global_step))

  return Recording


def _count_steps(session, hooks):
  global_step = tf.compat.v1.train.get_or_create_global_step()
  train_op = tf.compat.v1.assign_add(global_step, 1).op
  with session(hooks=hooks) as sess:
    for _ in range(8):
      sess.run(train_op)


def test_a_step_counter_subclass_finds_tfs_steps_per_run_and_summary_writer(tmp_path):
  with tf.Graph().as_default():
    tf1_hook = _step_counter_subclass(tf.compat.v1.train.StepCounterHook)(every_n_steps=3)
    _count_steps(tf.compat.v1.train.MonitoredSession, [tf1_hook])
  writer = tf.summary.create_file_writer(str(tmp_path))
  with tfmon.Graph().as_default():
    hook = _step_counter_subclass(tfmon.train.StepCounterHook)(
        every_n_steps=3, summary_writer=writer)
    _count_steps(tfmon.train.MonitoredSession, [hook])
  assert tf1_hook.logged == [(3, 4), (3, 7)]
  assert hook.logged == tf1_hook.logged
  assert hook.steps_per_run_given == tf1_hook.steps_per_run_given == 1
  assert hook.writer is writer
