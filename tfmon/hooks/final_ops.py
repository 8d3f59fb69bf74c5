"""FinalOpsHook: fetches values when the session ends, as v1's."""

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon.compiled import fetch_plan
from tfmon.hook_api import SessionRunHook


class FinalOpsHook(SessionRunHook):
  """Runs `final_ops` in `end()` and keeps their values in `final_ops_values`.

  `final_ops` are fetches (SPEC section 2) run without hooks by the session
  given to `end()`: step functions (they run then, on the final state, e.g. a
  metric's `result`), variables and values, in any nest. A name resolves only
  against the step functions of the same run, so it must name a key returned by
  a step function in `final_ops`: the training step does not run in `end()`. As
  v1, an `OutOfRangeError` or `StopIteration` from the
  final ops (they read the input again) is logged with an explanation and
  re-raised.

  Args:
    final_ops: A fetch or a nest of fetches (a list, or a dict of names to fetches).
    final_ops_feed_dict: A feed dict for the run of `final_ops`: step-function
      parameter names to values.

  Raises:
    TypeError: if `final_ops` holds something `run` cannot fetch, or
      `final_ops_feed_dict` is not a dict keyed by parameter names.
  """

  def __init__(self, final_ops, final_ops_feed_dict=None):
    fetch_plan.check_fetches(final_ops, 'FinalOpsHook final_ops')
    if final_ops_feed_dict is not None:
      if not isinstance(final_ops_feed_dict, dict):
        raise TypeError(
            f'FinalOpsHook final_ops_feed_dict must be a dict; got '
            f'{final_ops_feed_dict!r} of type {type(final_ops_feed_dict).__name__}.')
      for key in final_ops_feed_dict:
        if not isinstance(key, str):
          raise TypeError(
              f'FinalOpsHook final_ops_feed_dict key {key!r} is a '
              f'{type(key).__name__}. tfmon feeds step functions by parameter name: '
              "use the parameter name as the key, e.g. {'scale': 2.0}.")
    self._final_ops = final_ops
    self._final_ops_feed_dict = final_ops_feed_dict
    self._final_ops_values = None

  @property
  def final_ops_values(self):
    return self._final_ops_values

  def steps_until_observed(self, global_step):
    del global_step
    return None  # it works in end() only

  def end(self, session):
    if self._final_ops is None:
      return
    try:
      self._final_ops_values = session.run(
          self._final_ops, feed_dict=self._final_ops_feed_dict)
    except (tf.errors.OutOfRangeError, StopIteration):
      logging.warning(
          'An OutOfRangeError or StopIteration exception is raised by the '
          'code in FinalOpsHook. This typically means the Ops running by the '
          'FinalOpsHook have a dependency back to some input source, which '
          'should not happen. For example, for metrics in '
          'tf.estimator.Estimator, all metrics functions return two Ops: '
          '`value_op` and  `update_op`. Estimator.evaluate calls the '
          '`update_op` for each batch of the data in input source and, once '
          'it is exhausted, it call the `value_op` to get the metric values. '
          'The `value_op` here should have dependency back to variables '
          'reading only, rather than reading another batch from input. '
          'Otherwise, the `value_op`, executed by `FinalOpsHook`, triggers '
          'another data reading, which ends OutOfRangeError/StopIteration. '
          'Please fix that.')
      raise
