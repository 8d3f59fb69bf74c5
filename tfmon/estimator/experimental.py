"""tf.estimator.experimental's early-stopping hooks, reading an Estimator's eval dir."""

from tfmon.hooks import early_stopping


def _eval_dir(estimator, eval_dir):
  return eval_dir or estimator.eval_dir()


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None,
                        min_steps=0, run_every_secs=60, run_every_steps=None):
  """Stops when `metric_name` in `estimator`'s evaluations is above `threshold`."""
  return early_stopping.stop_if_higher_hook(
      _eval_dir(estimator, eval_dir), metric_name, threshold, min_steps=min_steps,
      run_every_secs=run_every_secs, run_every_steps=run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None,
                       min_steps=0, run_every_secs=60, run_every_steps=None):
  """Stops when `metric_name` in `estimator`'s evaluations is below `threshold`."""
  return early_stopping.stop_if_lower_hook(
      _eval_dir(estimator, eval_dir), metric_name, threshold, min_steps=min_steps,
      run_every_secs=run_every_secs, run_every_steps=run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Stops when `metric_name` has not increased for that many steps."""
  return early_stopping.stop_if_no_increase_hook(
      _eval_dir(estimator, eval_dir), metric_name, max_steps_without_increase,
      min_steps=min_steps, run_every_secs=run_every_secs,
      run_every_steps=run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Stops when `metric_name` has not decreased for that many steps."""
  return early_stopping.stop_if_no_decrease_hook(
      _eval_dir(estimator, eval_dir), metric_name, max_steps_without_decrease,
      min_steps=min_steps, run_every_secs=run_every_secs,
      run_every_steps=run_every_steps)


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
  """Stops when `should_stop_fn()` returns True (`estimator` is not needed here)."""
  del estimator  # it chose a hook for chief or workers; tfmon trains in one process
  return early_stopping.make_early_stopping_hook(
      should_stop_fn, run_every_secs=run_every_secs, run_every_steps=run_every_steps)
