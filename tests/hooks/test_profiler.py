"""ProfilerHook: a TF2 profiler trace per triggered step, for TensorBoard."""

import logging
import os

import pytest
import tensorflow as tf
# The XSpace proto the profiler writes (and TensorBoard's profile plugin reads).
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import tfmon
from tfmon.hooks.profiler import ProfilerHook


@pytest.fixture(autouse=True)
def _no_profiler_left_running():
  """Keeps a test that fails mid-trace from failing the next test's start()."""
  yield
  try:
    tf.profiler.experimental.stop(save=False)
  except tf.errors.UnavailableError:
    pass


def _step():
  """A step whose one op named 'profiled_step' shows it in a trace."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(1)
    return tf.multiply(global_step.read_value(), 2, name='profiled_step')

  return global_step, step


def _runs(output_dir):
  """The profile run directories under `output_dir`, by step."""
  profile_dir = os.path.join(output_dir, 'plugins', 'profile')
  runs = os.listdir(profile_dir) if os.path.isdir(profile_dir) else []
  return sorted(runs, key=_profiled_step)


def _profiled_step(run):
  return int(run.rsplit('_step_', 1)[1])


def _profiled_steps(output_dir):
  return [_profiled_step(run) for run in _runs(output_dir)]


def _executions_of_profiled_step(run_dir):
  """How many times the trace in `run_dir` saw the op named 'profiled_step' run.

  The step's graph is inlined into the session's compiled call, so its ops are
  named under the call site: 'StatefulPartitionedCall/profiled_step:Mul'.
  """
  files = [f for f in os.listdir(run_dir) if f.endswith('.xplane.pb')]
  assert files, f'no .xplane.pb in {run_dir}'
  count = 0
  for name in files:
    space = xplane_pb2.XSpace()
    with open(os.path.join(run_dir, name), 'rb') as f:
      space.ParseFromString(f.read())
    for plane in space.planes:
      ids = {i for i, metadata in plane.event_metadata.items()
             if metadata.name.split(':')[0].rsplit('/', 1)[-1] == 'profiled_step'}
      count += sum(event.metadata_id in ids
                   for line in plane.lines for event in line.events)
  return count


def _train(hook, last_step, steps_per_loop=1):
  global_step, step = _step()
  runs = 0
  with tfmon.train.MonitoredSession(
      hooks=[hook, tfmon.train.StopAtStepHook(last_step=last_step)],
      steps_per_loop=steps_per_loop) as sess:
    while not sess.should_stop():
      sess.run(step)  # fetched, so the named op is not pruned from the call
      runs += 1
  return runs


def test_profiles_only_triggered_steps_as_v1(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  _train(ProfilerHook(save_steps=2, output_dir=str(tmp_path)), last_step=7)
  # v1: the first run starts the timer, then every 2 steps of post-step global step.
  assert _profiled_steps(tmp_path) == [2, 4, 6]
  for run in _runs(tmp_path):
    run_dir = tmp_path / 'plugins' / 'profile' / run
    assert _executions_of_profiled_step(run_dir) == 1  # that run, and only it
    assert (f"Saving timeline for {_profiled_step(run)} into '{run_dir}'."
            in caplog.text)
  # Nothing else is left in output_dir: staging is cleaned up.
  assert os.listdir(tmp_path) == ['plugins']


def test_fused_runs_stop_short_so_that_each_profiled_step_runs_alone(tmp_path):
  runs = _train(ProfilerHook(save_steps=5, output_dir=str(tmp_path)), last_step=23,
                steps_per_loop=10)
  assert _profiled_steps(tmp_path) == [5, 10, 15, 20]  # as one step per run
  for run in _runs(tmp_path):
    assert _executions_of_profiled_step(tmp_path / 'plugins' / 'profile' / run) == 1
  # Runs: step 1 (starts the timer), 2-4, 5, 6-9, 10, 11-14, 15, 16-19, 20, 21-23.
  assert runs == 10


def test_save_secs_profiles_after_that_many_seconds(tmp_path):
  _train(ProfilerHook(save_secs=3600, output_dir=str(tmp_path)), last_step=4)
  assert not _runs(tmp_path)  # the first run starts the clock; an hour never passes
  _train(ProfilerHook(save_secs=0, output_dir=str(tmp_path / 'every')), last_step=7)
  # Every run after the first: this session runs steps 5, 6 and 7.
  assert _profiled_steps(tmp_path / 'every') == [6, 7]


def test_a_run_that_raises_does_not_leave_the_profiler_running(tmp_path, caplog):
  global_step, step = _step()

  def failing_step():
    tf.debugging.assert_less(global_step, tf.constant(1, tf.int64))
    return step()

  hook = ProfilerHook(save_steps=1, output_dir=str(tmp_path / 'failed'))
  with pytest.raises(tf.errors.InvalidArgumentError):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      for _ in range(3):
        sess.run(tfmon.train.op(failing_step))  # the profiled second run raises
  assert not _runs(tmp_path / 'failed')
  assert not os.path.exists(tmp_path / 'failed')  # no staged trace left either
  # The next session's ProfilerHook stops it as the session begins...
  tfmon.train.MonitoredSession(
      hooks=[ProfilerHook(save_secs=3600, output_dir=str(tmp_path))]).close()
  with pytest.raises(tf.errors.UnavailableError):
    tf.profiler.experimental.stop()  # no profiler is running
  assert caplog.text.count(
      'Discarding the profile of a run that raised before it ended.') == 1
  # ... and later hooks profile as usual.
  global_step.assign(0)
  _train(ProfilerHook(save_steps=1, output_dir=str(tmp_path / 'later')), last_step=3)
  assert _profiled_steps(tmp_path / 'later') == [2, 3]


class _PreemptSecondRun(tfmon.train.SessionRunHook):
  """Raises AbortedError in the after_run of the second run, once."""

  def __init__(self):
    self.runs = 0

  def after_run(self, run_context, run_values):
    self.runs += 1
    if self.runs == 2:
      raise tf.errors.AbortedError(None, None, 'worker preempted')


def test_a_preempted_profiled_run_is_profiled_again_when_retried(tmp_path, caplog):
  # The preemption hook comes first, so the ProfilerHook's after_run never
  # stops the trace of the preempted run; the retried run starts a new one.
  hooks = [_PreemptSecondRun(), ProfilerHook(save_steps=1, output_dir=tmp_path),
           tfmon.train.StopAtStepHook(last_step=3)]
  global_step, step = _step()
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    while not sess.should_stop():
      sess.run(step)
  assert global_step.numpy() == 3  # run 2 reached step 2, its retry step 3
  assert _profiled_steps(tmp_path) == [3]
  assert caplog.text.count(
      'Discarding the profile of a run that raised before it ended.') == 1


def test_another_running_profiler_skips_the_step_with_a_warning(tmp_path, caplog):
  tf.profiler.experimental.start(str(tmp_path / 'user'))
  try:
    _train(ProfilerHook(save_steps=1, output_dir=str(tmp_path / 'hook')), last_step=3)
  finally:
    tf.profiler.experimental.stop(save=False)
  assert not _runs(tmp_path / 'hook')
  assert caplog.text.count('ProfilerHook could not profile this step: another '
                           'profiler is running') == 2


def test_errors_are_v1s(tmp_path):
  with pytest.raises(ValueError, match='^Either every_secs or every_steps should be '
                     'provided.$'):
    ProfilerHook(output_dir=str(tmp_path))
  with pytest.raises(ValueError, match='^Can not provide both every_secs and '
                     'every_steps.$'):
    ProfilerHook(save_steps=1, save_secs=1, output_dir=str(tmp_path))
  with pytest.raises(TypeError, match='output_dir must be a directory path; got 3'):
    ProfilerHook(save_steps=1, output_dir=3)
  with pytest.raises(RuntimeError, match=r'^Global step should be created to use '
                     r'ProfilerHook\.'):
    tfmon.train.MonitoredSession(hooks=[ProfilerHook(save_steps=1,
                                                     output_dir=str(tmp_path))])


def test_show_dataflow_and_show_memory_are_accepted(tmp_path):
  hook = ProfilerHook(save_steps=1, output_dir=tmp_path, show_dataflow=False,
                      show_memory=True)
  _train(hook, last_step=2)
  assert _profiled_steps(tmp_path) == [2]


# --- RunOptions tracing (v1's FULL_TRACE), which the session turns into a profile.

_FULL_TRACE = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)


def test_a_run_with_full_trace_options_is_profiled_into_the_summary_dir(tmp_path,
                                                                          caplog):
  caplog.set_level(logging.INFO)
  global_step, step = _step()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_checkpoint_secs=None) as sess:
    sess.run(step)
    run_metadata = tf.compat.v1.RunMetadata()
    sess.run(step, options=_FULL_TRACE, run_metadata=run_metadata)
    sess.run(step)
  assert _profiled_steps(tmp_path) == [2]
  run_dir = tmp_path / 'plugins' / 'profile' / _runs(tmp_path)[0]
  assert _executions_of_profiled_step(run_dir) == 1  # that run, and only it
  assert (f'Saved the TF2 profile of the run reaching step 2 into {run_dir} '
          "(TensorBoard's Profile tab shows it" in caplog.text)
  assert not any(name.startswith('.profiler-staging') for name in os.listdir(tmp_path))


class _TracingHook(tfmon.train.SessionRunHook):
  """A v1-style hook asking for a traced run at the given post-step global steps."""

  def __init__(self, steps):
    self._steps = steps
    self.traced_metadata = []

  def begin(self):
    self._global_step = tfmon.train.get_global_step()

  def before_run(self, run_context):
    if int(self._global_step.numpy()) + 1 in self._steps:
      return tfmon.train.SessionRunArgs(None, options=_FULL_TRACE)
    return None

  def after_run(self, run_context, run_values):
    if run_values.options.trace_level == tf.compat.v1.RunOptions.FULL_TRACE:
      self.traced_metadata.append(run_values.run_metadata)


def test_a_hook_asking_for_a_traced_run_gets_it_profiled(tmp_path):
  hook = _TracingHook(steps={2, 4})
  _, step = _step()
  with tfmon.train.MonitoredSession(
      hooks=[hook, tfmon.train.StopAtStepHook(last_step=5)],
      profile_dir=str(tmp_path)) as sess:
    while not sess.should_stop():
      sess.run(step)
  assert _profiled_steps(tmp_path) == [2, 4]
  assert len(hook.traced_metadata) == 2  # after_run still sees the options


def test_a_traced_run_that_raises_keeps_no_profile_and_no_profiler(tmp_path):
  global_step, step = _step()

  def failing_step():
    tf.debugging.assert_less(global_step, tf.constant(1, tf.int64))
    return step()

  with pytest.raises(tf.errors.InvalidArgumentError):
    with tfmon.train.MonitoredSession(profile_dir=str(tmp_path)) as sess:
      sess.run(failing_step, options=_FULL_TRACE)
      sess.run(failing_step, options=_FULL_TRACE)  # raises
  assert _profiled_steps(tmp_path) == [1]
  with pytest.raises(tf.errors.UnavailableError):
    tf.profiler.experimental.stop()  # no profiler is running
  assert not any(name.startswith('.profiler-staging') for name in os.listdir(tmp_path))
