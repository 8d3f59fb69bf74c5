"""StopAtStepHook: stops training at a step, as v1's."""

import numbers

from tfmon import tf_logging as logging

from tfmon import training_util
from tfmon.hook_api import SessionRunArgs, SessionRunHook


class StopAtStepHook(SessionRunHook):
  """Hook that requests stop at a specified step.

  As v1's, with one deliberate fix: if the global step restored at session
  creation has already reached `last_step`, the session stops there (through the
  coordinator, so `should_stop()` is true before any run) and says so, instead of
  running one more step. Re-running a finished job does nothing.

  Args:
    num_steps: Number of steps to execute after the session is created.
    last_step: Step after which to stop.

  Raises:
    ValueError: If one of the arguments is invalid.
  """

  def __init__(self, num_steps=None, last_step=None):
    if num_steps is None and last_step is None:
      raise ValueError('One of num_steps or last_step must be specified.')
    if num_steps is not None and last_step is not None:
      raise ValueError('Only one of num_steps or last_step can be specified.')
    for name, value in (('num_steps', num_steps), ('last_step', last_step)):
      if value is None:
        continue
      if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f'StopAtStepHook {name}={value!r} of type '
                        f'{type(value).__name__} is not a step count: pass an int.')
      if value < 0:
        raise ValueError(f'StopAtStepHook {name}={value!r} is negative: pass the '
                         'number of steps to run, or the global step to stop at.')
    self._num_steps = num_steps
    self._last_step = last_step

  def begin(self):
    self._global_step_tensor = training_util.require_global_step('StopAtStepHook')

  def after_create_session(self, session, coord):
    global_step = int(session.run(self._global_step_tensor))
    if self._last_step is None:
      self._last_step = global_step + self._num_steps
    elif global_step >= self._last_step:
      logging.info(
          'Global step %d has already reached last_step %d: stopping before the '
          'first run. Raise last_step to train further.', global_step, self._last_step)
      coord.request_stop()

  def steps_until_observed(self, global_step):
    """Runs may fuse steps up to `last_step`, which this hook must see."""
    return max(1, self._last_step - global_step)

  def before_run(self, run_context):
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    # A session that tracks the global step knows where the run left it; v1's
    # guess from the value fetched before the run assumes the run added one.
    tracked = getattr(run_context, 'global_step_after', None)
    if tracked is not None:
      if tracked >= self._last_step:
        run_context.request_stop()
      return
    global_step = run_values.results + 1
    if global_step >= self._last_step:
      # The fetched value is the global step before this run's steps: read it
      # again to see whether this run incremented it.
      step = training_util.global_step_after_run(
          run_context, self._global_step_tensor)
      if step >= self._last_step:
        run_context.request_stop()
