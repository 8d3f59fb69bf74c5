"""ProfilerHook: a TF2 profiler trace of the run every N steps or seconds."""

import os

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import training_util
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger
from tfmon.profiling import Traces, discard_unfinished_trace


class ProfilerHook(SessionRunHook):
  """Profiles one run every N steps or seconds with the TF2 profiler.

  Trigger rules are v1's: the first run starts the timer and is not profiled;
  then a run is profiled when the timer fires for its expected post-step global
  step (`save_steps=2` from step 0 profiles the runs that reach steps 2, 4, 6).
  Where v1 traced the run with `RunOptions.FULL_TRACE` and wrote
  `timeline-<step>.json`, this starts `tf.profiler.experimental` in `before_run`
  and stops it in `after_run`, and writes the trace for TensorBoard's Profile
  tab: `<output_dir>/plugins/profile/<time>_step_<step>/<host>.xplane.pb`, one
  run directory per profiled step.

  A run that raises while it is profiled leaves the profiler running, since the
  session calls no hook when a run raises; the next ProfilerHook to begin a
  session or start a trace (after a recovery) stops it and discards that trace.

  Args:
    save_steps: Profile every N steps.
    save_secs: Profile every N seconds. Exactly one of `save_steps` and
      `save_secs` should be set.
    output_dir: The TensorBoard log directory to write the traces under; the
      current directory by default.
    show_dataflow: Accepted for v1 compatibility: the TF2 trace viewer draws
      flows itself.
    show_memory: Accepted for v1 compatibility: the TF2 profiler has a memory
      profile tool of its own.

  Raises:
    ValueError: if not exactly one of `save_steps` and `save_secs` is set.
    TypeError: if `output_dir` is not a path.
  """

  def __init__(self, save_steps=None, save_secs=None, output_dir='',
               show_dataflow=True, show_memory=False):
    if not isinstance(output_dir, (str, os.PathLike)):
      raise TypeError(f'ProfilerHook output_dir must be a directory path; got '
                      f'{output_dir!r} of type {type(output_dir).__name__}.')
    self._traces = Traces(os.fspath(output_dir))
    self._show_dataflow = show_dataflow
    self._show_memory = show_memory
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=save_secs, every_steps=save_steps)
    self._save_steps = save_steps

  def begin(self):
    discard_unfinished_trace()  # left by a session that raised mid-run
    self._next_step = None
    self._tracing = False
    self._timer.reset()
    self._global_step_tensor = training_util.require_global_step('ProfilerHook')

  def steps_until_observed(self, global_step):
    """Fused runs stop one step short of a profiled step, so that it runs alone.

    The hook sees the run that ends one step before the trigger step, and then the
    one-step run that reaches it. With `save_secs` (or before the first run
    started the timer) it sees every run, and runs stay one step.
    """
    if self._next_step is None:
      return 1
    return steps_until_trigger(self._timer, self._save_steps, global_step + 1)

  def before_run(self, run_context):
    self._request_profile = (
        self._next_step is not None and
        self._timer.should_trigger_for_step(self._next_step))
    if self._request_profile:
      self._tracing = self._traces.start('ProfilerHook')
    return SessionRunArgs({'global_step': self._global_step_tensor})

  def after_run(self, run_context, run_values):
    traced = self._tracing
    if traced:
      # Stop before anything else runs, so the trace holds this run only.
      self._tracing = False
      self._traces.stop()
    stale_global_step = int(run_values.results['global_step'])
    if self._next_step is None:
      # The first run starts the timer, so it fires N steps or secs from now.
      self._timer.update_last_triggered_step(stale_global_step)
    global_step = stale_global_step + 1
    if self._request_profile:
      global_step = training_util.global_step_after_run(
          run_context, self._global_step_tensor)
      self._timer.update_last_triggered_step(global_step)
      if traced:
        self._save(global_step)
    self._next_step = global_step + 1

  def end(self, session):
    del session  # unused
    if self._tracing:
      self._tracing = False
      discard_unfinished_trace()

  def _save(self, step):
    run_dir = self._traces.save(step)
    logging.info("Saving timeline for %d into '%s'.", step, run_dir)
