"""GlobalStepWaiterHook: delays training until the global step is reached."""

import numbers
import time

from tfmon import tf_logging as logging

from tfmon.training_util import require_global_step
from tfmon.hook_api import SessionRunHook

# v1's polling period: the global step is read twice a second while waiting.
_POLL_SECS = 0.5


class GlobalStepWaiterHook(SessionRunHook):
  """Delays execution until the global step reaches `wait_until_step`.

  Used to start workers gradually in distributed training, e.g. with
  `wait_until_step=int(K * log(task_id + 1))` so the chief (task 0) starts at
  once. Before the first run, the hook polls the global step every half second
  until it reaches `wait_until_step` (another worker, or another thread,
  increments it), logging `Waiting for global step %d before starting training.`
  and the current step whenever it advanced by more than 1000. Later runs do not
  wait.

  Args:
    wait_until_step: The global step to wait for; 0 or less does not wait.

  Raises:
    TypeError: if `wait_until_step` is not an int.
  """

  def __init__(self, wait_until_step):
    if isinstance(wait_until_step, bool) or not isinstance(
        wait_until_step, numbers.Integral):
      raise TypeError(f'GlobalStepWaiterHook wait_until_step must be an int; got '
                      f'{wait_until_step!r} of type {type(wait_until_step).__name__}.')
    self._wait_until_step = wait_until_step

  def begin(self):
    self._worker_is_started = False
    self._global_step_tensor = require_global_step('GlobalStepWaiterHook')

  def steps_until_observed(self, global_step):
    del global_step
    return None if self._worker_is_started else 1  # idle once training started

  def before_run(self, run_context):
    if self._worker_is_started:
      return None
    if self._wait_until_step <= 0:
      self._worker_is_started = True
      return None
    logging.info('Waiting for global step %d before starting training.',
                 self._wait_until_step)
    last_logged_step = 0
    while True:
      current_step = int(run_context.session.run(self._global_step_tensor))
      if current_step >= self._wait_until_step:
        self._worker_is_started = True
        return None
      if current_step - last_logged_step > 1000:
        logging.info(
            'Waiting for global step %d before starting training. '
            'Current step is %d.', self._wait_until_step, current_step)
        last_logged_step = current_step
      time.sleep(_POLL_SECS)
