"""Step fusion: fused runs behave as unfused ones, and idle hooks cost nothing."""

import logging
import re

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests import event_files
from tests.training import Job, forget_global_step


class CountingHook(tfmon.train.SessionRunHook):
  """A v1 hook: declares nothing, so it must see every step."""

  def begin(self):
    self.runs = 0

  def after_run(self, run_context, run_values):
    self.runs += 1


def _train(tmp_path, steps_per_loop, last_step=23, extra_hooks=()):
  job = Job()
  counter = CountingHook()
  hooks = [tfmon.train.NanTensorHook('loss'),
           tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=5),
           *extra_hooks]
  runs = 0
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint=job.checkpoint,
      save_checkpoint_steps=10, save_summaries_steps=5, log_step_count_steps=5,
      steps_per_loop=steps_per_loop,
      hooks=hooks + [tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step))
      runs += 1
  state = tf.train.get_checkpoint_state(str(tmp_path))
  checkpoints = [int(p.rsplit('-', 1)[-1]) for p in state.all_model_checkpoint_paths]
  events = event_files.events(tmp_path)
  summaries = list(zip(event_files.steps(events, 'loss'),
                       event_files.values(events, 'loss')))
  return job, runs, checkpoints, summaries


def _logged_losses(text):
  return re.findall(r'loss = ([\d.]+)', text)


def test_fused_and_unfused_runs_do_the_same_work(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  unfused, unfused_runs, unfused_checkpoints, unfused_summaries = _train(
      tmp_path / 'unfused', 1)
  unfused_logged = _logged_losses(caplog.text)
  caplog.clear()
  forget_global_step()
  fused, fused_runs, fused_checkpoints, fused_summaries = _train(tmp_path / 'fused', 8)
  fused_logged = _logged_losses(caplog.text)

  assert unfused_runs == 23 and fused_runs < 23
  assert fused.global_step.numpy() == unfused.global_step.numpy() == 23
  for a, b in zip(fused.variables(), unfused.variables()):
    np.testing.assert_array_equal(a, b)
  assert fused_checkpoints == unfused_checkpoints == [0, 10, 20, 23]
  assert [s for s, _ in fused_summaries] == [s for s, _ in unfused_summaries] == [
      1, 6, 11, 16, 21]
  assert [v for _, v in fused_summaries] == pytest.approx(
      [v for _, v in unfused_summaries])
  assert len(unfused_logged) == 5 and fused_logged == unfused_logged  # iterations 0, 5, ...


def test_a_v1_hook_keeps_every_run_one_step(tmp_path):
  counter = CountingHook()
  job, runs, _, _ = _train(tmp_path, 8, last_step=12, extra_hooks=[counter])
  assert runs == counter.runs == 12


def test_nan_stops_a_fused_loop_at_the_offending_step():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    return {'loss': tf.where(global_step >= 13, np.float32(np.nan), np.float32(1.0))}

  with pytest.raises(tfmon.train.NanLossDuringTrainingError):
    with tfmon.train.MonitoredSession(
        hooks=[tfmon.train.NanTensorHook('loss')], steps_per_loop=10) as sess:
      while True:
        sess.run(tfmon.train.op(step))
  assert global_step.numpy() == 13


def test_data_running_out_mid_loop_ends_after_the_last_full_step():
  global_step = tfmon.train.get_or_create_global_step()
  iterator = iter(tf.data.Dataset.range(15))
  total = tf.Variable(0, dtype=tf.int64)

  def step():
    batch = next(iterator)
    total.assign_add(batch)
    # Ops on other resources are not ordered after next(): tie the increment to
    # the data so that a step without data does not count.
    global_step.assign_add(tf.cast(batch >= 0, tf.int64))

  with tfmon.train.MonitoredSession(
      hooks=[tfmon.train.StopAtStepHook(last_step=100)], steps_per_loop=10) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  assert global_step.numpy() == 15
  assert total.numpy() == sum(range(15))


class IdleHook(tfmon.train.SessionRunHook):
  """Needs to see the run reaching every 1000th step, and nothing else."""

  def begin(self):
    self.seen = []

  def steps_until_observed(self, global_step):
    return 1000 - global_step % 1000

  def before_run(self, run_context):
    return tfmon.train.SessionRunArgs(tfmon.train.get_global_step())

  def after_run(self, run_context, run_values):
    self.seen.append((int(run_values.results) + 1, run_context.steps_run))


def test_idle_hooks_are_called_only_when_due():
  global_step = tfmon.train.get_or_create_global_step()
  idle = [IdleHook() for _ in range(50)]
  step = tfmon.train.op(lambda: global_step.assign_add(1))
  with tfmon.train.MonitoredSession(hooks=idle) as sess:
    for _ in range(2000):
      sess.run(step)
  assert all(hook.seen == [(1000, 1000), (2000, 1000)] for hook in idle)


@pytest.mark.parametrize('steps_per_loop', [1, 10])
def test_hooks_see_the_global_step_the_run_left(steps_per_loop):
  global_step = tfmon.train.get_or_create_global_step()
  reads = []

  class ReadsAfterRun(IdleHook):

    def after_run(self, run_context, run_values):
      reads.append((tfmon.train.global_step_after_run(run_context, global_step),
                    int(global_step.numpy())))

  with tfmon.train.MonitoredSession(hooks=[ReadsAfterRun()],
                                    steps_per_loop=steps_per_loop) as sess:
    step = tfmon.train.op(lambda: global_step.assign_add(1))
    while global_step.numpy() < 2000:
      sess.run(step)
  assert reads == [(1000, 1000), (2000, 2000)]


def test_fused_runs_of_any_length_share_one_trace():
  global_step = tfmon.train.get_or_create_global_step()
  traces = []

  def step():
    traces.append(1)
    global_step.assign_add(1)

  with tfmon.train.MonitoredSession(
      hooks=[tfmon.train.StopAtStepHook(last_step=37)], steps_per_loop=10) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  assert global_step.numpy() == 37
  # Traced for the peeled first step and the loop body of each call structure:
  # the fused runs (10, 10, 10, then 7 steps) and the final one that StopAtStepHook sees.
  assert len(traces) <= 4


def test_steps_per_loop_must_be_a_positive_int():
  with pytest.raises(ValueError, match='steps_per_loop=0 must be a positive int'):
    tfmon.train.MonitoredSession(steps_per_loop=0)


def test_jit_compile_trains_the_same_model():
  def train(jit_compile):
    forget_global_step()
    job = Job()
    with tfmon.train.MonitoredSession(
        hooks=[tfmon.train.StopAtStepHook(last_step=5)],
        jit_compile=jit_compile) as sess:
      while not sess.should_stop():
        # No summaries in the step: XLA cannot compile summary writes.
        sess.run(tfmon.train.op(job.step_without_summaries))
    return job.variables()

  for a, b in zip(train(True), train(None)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_fused_run_resolves_graph_names_as_of_its_last_step():
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    tf.identity(tf.cast(global_step, tf.float32), name='step_as_float')
    return {'loss': tf.constant(1.0)}

  class FetchByGraphName(tfmon.train.SessionRunHook):
    observes_fused_runs = True

    def __init__(self):
      self.values = []

    def before_run(self, run_context):
      return tfmon.train.SessionRunArgs('step_as_float')

    def after_run(self, run_context, run_values):
      self.values.append(run_values.results)

  hook = FetchByGraphName()
  with tfmon.train.MonitoredSession(hooks=[hook], steps_per_loop=5) as sess:
    for _ in range(3):
      sess.run(tfmon.train.op(step))
  assert hook.values == [5.0, 10.0, 15.0]


def test_evaluation_and_early_stopping_see_the_same_steps_fused():
  def run(steps_per_loop):
    forget_global_step()
    job = Job()
    dataset = tf.data.Dataset.from_tensor_slices(
        (job.features[0], job.labels[0])).batch(4)

    def eval_step(features, labels):
      return {'loss': job.loss_fn(labels, job.model(features, training=False))}

    evaluation = tfmon.train.EvaluationHook(eval_step, dataset, every_n_steps=4)
    stopper = tfmon.train.stop_if_higher_hook(
        evaluation, 'loss', threshold=1e9, run_every_secs=None, run_every_steps=3)
    with tfmon.train.MonitoredSession(
        hooks=[evaluation, stopper, tfmon.train.StopAtStepHook(last_step=10)],
        steps_per_loop=steps_per_loop) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(job.step_without_summaries))
    return evaluation.results_by_step

  fused, unfused = run(10), run(1)
  assert list(fused) == list(unfused) == [4, 8, 10]
  for step in fused:
    assert fused[step]['loss'] == pytest.approx(unfused[step]['loss'], rel=1e-6)


class WatchesEveryRun(tfmon.train.SessionRunHook):
  """Called on every run, as a built-in hook that declares it: sees counted runs.

  Keeps, per run, the global step the session says the run left and the
  variable's own value.
  """

  observes_fused_runs = True

  def __init__(self, global_step):
    self.global_step = global_step
    self.seen = []

  def after_run(self, run_context, run_values):
    self.seen.append((tfmon.train.global_step_after_run(run_context, self.global_step),
                      int(self.global_step.numpy())))


def test_a_counted_global_step_stays_exact_across_calls_the_session_did_not_make():
  global_step = tfmon.train.get_or_create_global_step()
  watcher = WatchesEveryRun(global_step)
  step = tfmon.train.op(lambda: global_step.assign_add(3))

  def one_raw_run_then_a_hooked_one(step_context):
    step_context.session.run(step)  # the raw session: no hooks see it
    return step_context.run_with_hooks(step)

  with tfmon.train.MonitoredSession(hooks=[watcher]) as sess:
    for _ in range(3):
      sess.run(step)
    for _ in range(2):
      sess.run_step_fn(one_raw_run_then_a_hooked_one)
    sess.run(step)
  assert [told for told, _ in watcher.seen] == [3, 6, 9, 15, 21, 24]
  assert all(told == actual for told, actual in watcher.seen)


def test_a_run_that_raised_makes_the_next_one_read_the_global_step():
  global_step = tfmon.train.get_or_create_global_step()
  watcher = WatchesEveryRun(global_step)

  def step(x):
    with tf.control_dependencies([global_step.assign_add(1)]):
      return tf.debugging.check_numerics(x, 'x is not finite')

  with tfmon.train.SingularMonitoredSession(hooks=[watcher]) as sess:
    sess.run(tfmon.train.op(step), feed_dict={'x': 1.0})
    with pytest.raises(tf.errors.InvalidArgumentError, match='x is not finite'):
      sess.run(tfmon.train.op(step), feed_dict={'x': np.nan})
    sess.run(tfmon.train.op(step), feed_dict={'x': 1.0})
  assert watcher.seen == [(1, 1), (3, 3)]  # the failed run added one too


def test_a_due_hook_sees_a_global_step_changed_outside_runs():
  global_step = tfmon.train.get_or_create_global_step()
  reads = []

  class EveryTenSteps(tfmon.train.SessionRunHook):

    def steps_until_observed(self, value):
      return 10 - value % 10

    def after_run(self, run_context, run_values):
      reads.append((tfmon.train.global_step_after_run(run_context, global_step),
                    int(global_step.numpy())))

  step = tfmon.train.op(lambda: global_step.assign_add(1))
  with tfmon.train.MonitoredSession(hooks=[EveryTenSteps()]) as sess:
    for _ in range(4):
      sess.run(step)
    global_step.assign_add(100)  # eager code between runs: no run counts it
    for _ in range(16):
      sess.run(step)
  # Due when the counted step reaches 10, it reads the variable: 110, then 120.
  assert reads == [(110, 110), (120, 120)]


@pytest.mark.parametrize('steps_per_loop', [1, 10])
def test_a_step_adding_two_stops_where_an_unfused_run_would(steps_per_loop):
  global_step = tfmon.train.get_or_create_global_step()
  runs = tf.Variable(0)

  def step():
    runs.assign_add(1)
    global_step.assign_add(2)

  with tfmon.train.MonitoredSession(
      hooks=[tfmon.train.StopAtStepHook(last_step=27)],
      steps_per_loop=steps_per_loop) as sess:
    session_runs = 0
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
      session_runs += 1
  assert global_step.numpy() == 28  # the first step to reach 27
  assert runs.numpy() == 14
  # Fused: 10 steps, then 4 ending exactly at the first step past 27.
  assert session_runs == {1: 14, 10: 2}[steps_per_loop]


def _train_adding_four(graph_class, session_class, stop_hook_class, directory):
  """A train op adding 4 to the global step: TF1 saved on the run that crossed
  each due step (12, 24, 36), not on the one after."""
  v1 = tf.compat.v1
  with graph_class().as_default():
    global_step = v1.train.get_or_create_global_step()
    weight = v1.get_variable('w', [], initializer=v1.zeros_initializer())
    train_op = tf.group(v1.assign_add(weight, 1.), v1.assign_add(global_step, 4))
    with session_class(checkpoint_dir=str(directory), save_checkpoint_steps=10,
                       save_summaries_steps=None, log_step_count_steps=None,
                       hooks=[stop_hook_class(last_step=40)]) as sess:
      while not sess.should_stop():
        sess.run(train_op)
  state = tf.train.get_checkpoint_state(str(directory))
  return [int(p.rsplit('-', 1)[-1]) for p in state.all_model_checkpoint_paths]


def test_a_train_op_adding_four_saves_and_stops_where_tf1_did(tmp_path):
  tf1 = _train_adding_four(tf.Graph, tf.compat.v1.train.MonitoredTrainingSession,
                           tf.compat.v1.train.StopAtStepHook, tmp_path / 'tf1')
  ported = _train_adding_four(tfmon.Graph, tfmon.train.MonitoredTrainingSession,
                              tfmon.train.StopAtStepHook, tmp_path / 'tfmon')
  # TF1's hooks guessed the step from a read racing the train op: its last
  # step is 40 or 44 from run to run. tfmon's StopAtStepHook knows it.
  assert tf1[-4:-1] == ported[-4:-1] == [12, 24, 36]
  assert ported[-1] == 40
