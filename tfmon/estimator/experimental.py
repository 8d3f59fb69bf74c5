"""tf.estimator.experimental's early-stopping hooks, reading an Estimator's eval dir.

Each is tfmon.train's hook of the same name (hooks/early_stopping.py), given
the estimator's `eval_dir()` unless `eval_dir` is: Estimator's signature,
`(estimator, metric_name, threshold or max_steps, eval_dir=None, min_steps=0,
run_every_secs=60, run_every_steps=None)`.
"""

import functools

from tfmon.hooks import early_stopping


def _reading_eval_dir(hook_fn):
  """`hook_fn` with Estimator's signature: the estimator first, its eval dir read."""

  @functools.wraps(hook_fn)
  def hook(estimator, metric_name, value, eval_dir=None, min_steps=0,
           run_every_secs=60, run_every_steps=None):
    return hook_fn(eval_dir or estimator.eval_dir(), metric_name, value,
                   min_steps=min_steps, run_every_secs=run_every_secs,
                   run_every_steps=run_every_steps)

  return hook


stop_if_higher_hook = _reading_eval_dir(early_stopping.stop_if_higher_hook)
stop_if_lower_hook = _reading_eval_dir(early_stopping.stop_if_lower_hook)
stop_if_no_increase_hook = _reading_eval_dir(early_stopping.stop_if_no_increase_hook)
stop_if_no_decrease_hook = _reading_eval_dir(early_stopping.stop_if_no_decrease_hook)


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
  """Stops when `should_stop_fn()` returns True (`estimator` is not needed here)."""
  del estimator  # it chose a hook for chief or workers; tfmon trains in one process
  return early_stopping.make_early_stopping_hook(
      should_stop_fn, run_every_secs=run_every_secs, run_every_steps=run_every_steps)
