"""NanTensorHook and NanLossDuringTrainingError: stop when the loss is NaN, as v1's."""

from tfmon import tf_logging as logging
import numpy as np
import tensorflow as tf

from tfmon.compiled import fetch_plan
from tfmon.hook_api import SessionRunArgs, SessionRunHook

# TensorFlow's own class, so `except tf.compat.v1.train.NanLossDuringTrainingError`
# in ported code catches what this hook raises. str() is 'NaN loss during training.'
NanLossDuringTrainingError = tf.compat.v1.train.NanLossDuringTrainingError

# A loss is one value: a name, a step function returning it, a variable or a value.
_LOSS_KINDS = (fetch_plan.NAME, fetch_plan.STEP, fetch_plan.VARIABLE, fetch_plan.VALUE)


class NanTensorHook(SessionRunHook):
  """Monitors the loss and stops training if it is NaN, as v1's.

  The loss is fetched on every run. When it is NaN the hook logs `Model diverged
  with loss = NaN.` and raises `NanLossDuringTrainingError` (logged at ERROR), or,
  with `fail_on_nan_loss=False`, requests a stop without an exception (logged at
  WARNING, as v1 does).

  Args:
    loss_tensor: The loss: the name a step function returns it under (`'loss'`),
      a tensor name of the traced graph, a step function returning the loss, or a
      variable holding it.
    fail_on_nan_loss: Whether to raise an exception when the loss is NaN.

  Raises:
    TypeError: if `loss_tensor` is not one fetchable value.
  """

  def __init__(self, loss_tensor, fail_on_nan_loss=True):
    if tf.nest.is_nested(loss_tensor):
      raise TypeError(f'NanTensorHook loss_tensor is the nest {loss_tensor!r}; give '
                      "one loss, e.g. its name: NanTensorHook('loss').")
    fetch_plan.check_fetches(loss_tensor, 'NanTensorHook loss_tensor')
    if fetch_plan.leaf_kind(loss_tensor) not in _LOSS_KINDS:
      raise TypeError(
          f'NanTensorHook loss_tensor is {loss_tensor!r}, which fetches no value. '
          "Give the loss's name ('loss'), a step function returning it or a variable.")
    self._loss_tensor = self._loss_fetch = loss_tensor
    # A loss fetched by name is checked inside fused loops, which stop at the NaN
    # step; any other loss keeps runs to one step, so every step is checked.
    self.observes_fused_runs = isinstance(loss_tensor, str)
    if self.observes_fused_runs:
      self._loss_fetch = fetch_plan.StopIf(loss_tensor, tf.math.is_nan)
    self._fail_on_nan_loss = fail_on_nan_loss

  def before_run(self, run_context):
    return SessionRunArgs(self._loss_fetch)

  def after_run(self, run_context, run_values):
    try:
      is_nan = bool(np.isnan(run_values.results))
    except (TypeError, ValueError):
      raise TypeError(
          f'NanTensorHook loss_tensor {self._loss_tensor!r} gave '
          f'{run_values.results!r}; the loss must be one number.') from None
    if is_nan:
      failure_message = 'Model diverged with loss = NaN.'
      if self._fail_on_nan_loss:
        logging.error(failure_message)
        raise NanLossDuringTrainingError
      logging.warning(failure_message)
      # Stop cleanly: no exception, should_stop() becomes true.
      run_context.request_stop()
