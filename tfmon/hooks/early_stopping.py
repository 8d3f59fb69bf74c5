"""Early stopping with Estimator's API (`tf.estimator.experimental.stop_if_*_hook`).

Estimator's hooks read an estimator's eval directory; here the first argument
says where evaluation results come from: an `EvaluationHook` of the same
training loop, or a directory of event files (Estimator's `estimator.eval_dir()`,
`<summary_dir>/<name>` of an EvaluationHook, or the directory a separate
evaluator job writes to). The decision rules, defaults and log lines are
Estimator's.
"""

import numbers
import operator
import os

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon.training_util import require_global_step
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger
from tfmon.hooks.evaluation import EvaluationHook, read_eval_metrics

class _EvalResults:
  """Where a stopping rule reads evaluation results: an EvaluationHook or a directory."""

  def __init__(self, evaluation, eval_dir, caller):
    if eval_dir is not None and evaluation is not None:
      raise ValueError(
          f'{caller} got both an evaluation source ({evaluation!r}) and '
          f'eval_dir={eval_dir!r}. Pass one: an EvaluationHook, or the directory of '
          'evaluation event files.')
    source = evaluation if eval_dir is None else eval_dir
    if isinstance(source, EvaluationHook):
      self._hook, self._dir = source, None
    elif isinstance(source, (str, os.PathLike)):
      self._hook, self._dir = None, os.fspath(source)
    else:
      raise TypeError(
          f'{caller} reads evaluation results from an EvaluationHook or a directory '
          f'of event files (a str or path); got {source!r} of type '
          f'{type(source).__name__}. Estimator users: pass estimator.eval_dir().')

  def __str__(self):
    if self._hook is not None:
      return f'EvaluationHook {self._hook.name!r}'
    return f'event files in {self._dir}'

  def read(self):
    """An ordered dict from global step to metrics, sorted by step."""
    if self._hook is not None:
      return self._hook.results_by_step
    return read_eval_metrics(self._dir)

  def check_metric(self, metric_name):
    """Raises ValueError if the source is known not to produce `metric_name`."""
    if self._hook is None:
      return  # event files may not exist yet: checked when read
    names = self._hook.metric_names
    if names is None:
      logging.warning(
          'The early stopping hook was set up before its %s: place the '
          'EvaluationHook in the same session\'s hooks, before the early stopping '
          'hook, so that each check sees the evaluation of the same run.', self)
    elif metric_name not in names:
      raise ValueError(
          f'Early stopping watches metric {metric_name!r}, but {self} reports only '
          f'{names}. Use one of those names.')

  def metric(self, metrics, step, metric_name):
    """`metrics[metric_name]`, or a ValueError saying which names exist."""
    try:
      return metrics[metric_name]
    except KeyError:
      names = sorted(name for name in metrics if name != 'global_step')
      raise ValueError(
          f'Early stopping watches metric {metric_name!r}, but the evaluation at '
          f'global step {step} from {self} has only {names}. Use one of those '
          'names.') from None


class _StopOnPredicateHook(SessionRunHook):
  """Requests stop when `should_stop_fn` returns True, checked every N secs or steps.

  Estimator's hook of the same name: the check runs on the first run and then on
  a `SecondOrStepTimer` by the global step fetched with the run (the pre-step
  value, as Estimator's).

  Args:
    should_stop_fn: A callable without arguments returning a bool.
    run_every_secs: Check every N seconds.
    run_every_steps: Check every N steps.
    check_fn: Called in `after_create_session` to fail early, or None.
  """

  def __init__(self, should_stop_fn, run_every_secs=60, run_every_steps=None,
               check_fn=None):
    if not callable(should_stop_fn):
      raise TypeError('`should_stop_fn` must be callable.')
    self._should_stop_fn = should_stop_fn
    self._check_fn = check_fn
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=run_every_secs, every_steps=run_every_steps)
    self._every_steps = run_every_steps

  def begin(self):
    self._global_step_tensor = require_global_step('the early stopping hook')
    self._timer.reset()

  def after_create_session(self, session, coord):
    if self._check_fn is not None:
      self._check_fn()

  def steps_until_observed(self, global_step):
    # This hook triggers on the pre-step global step (as Estimator's), so the
    # run to see is the one after the timer's next step.
    return steps_until_trigger(self._timer, self._every_steps, global_step - 1)

  def before_run(self, run_context):
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    global_step = int(run_values.results)
    if self._timer.should_trigger_for_step(global_step):
      self._timer.update_last_triggered_step(global_step)
      if self._should_stop_fn():
        logging.info('Requesting early stopping at global step %d', global_step)
        run_context.request_stop()


def _check_period(run_every_secs, run_every_steps):
  if run_every_secs is not None and run_every_steps is not None:
    raise ValueError(
        'Only one of `run_every_secs` and `run_every_steps` must be set. '
        f'Got run_every_secs={run_every_secs!r} and '
        f'run_every_steps={run_every_steps!r}; run_every_secs defaults to 60, so '
        'pass run_every_secs=None with run_every_steps.')
  if run_every_secs is None and run_every_steps is None:
    raise ValueError('One of `run_every_secs` and `run_every_steps` must be set.')
  for name, value in (('run_every_secs', run_every_secs),
                      ('run_every_steps', run_every_steps)):
    if value is not None and not _is_non_negative_number(value):
      raise ValueError(f'`{name}` must be a non-negative number (0: every run); got '
                       f'{value!r}.')


def _is_non_negative_number(value):
  """What Estimator's comparisons accept for a step count or period: 1e4 too."""
  return (not isinstance(value, bool) and isinstance(value, numbers.Real) and
          value >= 0)


def make_early_stopping_hook(should_stop_fn, run_every_secs=60, run_every_steps=None):
  """Creates a hook that stops training when `should_stop_fn` returns True.

  Estimator's function without its `estimator` argument (which only chose a
  hook for chief, worker or multi-worker training; tfmon trains in one process).

  Args:
    should_stop_fn: A callable without arguments returning a bool.
    run_every_secs: Call `should_stop_fn` every N seconds (default 60).
    run_every_steps: Call `should_stop_fn` every N steps; pass `run_every_secs=None`
      with it.

  Returns:
    A `SessionRunHook`.

  Raises:
    TypeError: `should_stop_fn` is not callable.
    ValueError: both or neither of `run_every_secs` and `run_every_steps`, or a
      negative one.
  """
  if not callable(should_stop_fn):
    raise TypeError(
        f'`should_stop_fn` must be callable; got {should_stop_fn!r}. tfmon\'s '
        'make_early_stopping_hook takes no estimator: '
        'make_early_stopping_hook(should_stop_fn, run_every_secs=..., ...).')
  _check_period(run_every_secs, run_every_steps)
  return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)


def _check_common(caller, metric_name, min_steps, run_every_secs, run_every_steps):
  if not isinstance(metric_name, str) or not metric_name:
    raise TypeError(f'{caller} metric_name must be a metric name (a non-empty str); '
                    f'got {metric_name!r}.')
  if not _is_non_negative_number(min_steps):
    raise ValueError(f'{caller} min_steps must be a non-negative number of global '
                     f'steps; got {min_steps!r}.')
  _check_period(run_every_secs, run_every_steps)


def _stop_if_threshold_crossed_hook(caller, evaluation, metric_name, threshold,
                                    higher_is_better, eval_dir, min_steps,
                                    run_every_secs, run_every_steps):
  """A hook that stops when `metric_name` crosses `threshold`."""
  _check_common(caller, metric_name, min_steps, run_every_secs, run_every_steps)
  if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
    raise TypeError(f'{caller} threshold must be a number; got {threshold!r}.')
  results = _EvalResults(evaluation, eval_dir, caller)
  is_lhs_better = operator.gt if higher_is_better else operator.lt
  greater_or_lesser = 'greater than' if higher_is_better else 'less than'

  def stop_if_threshold_crossed_fn():
    """Returns `True` if the given metric crosses specified threshold."""
    for step, metrics in results.read().items():
      if step < min_steps:
        continue
      val = results.metric(metrics, step, metric_name)
      if is_lhs_better(val, threshold):
        logging.info(
            'At step %s, metric "%s" has value %s which is %s the configured '
            'threshold (%s) for early stopping.', step, metric_name, val,
            greater_or_lesser, threshold)
        return True
    return False

  return _StopOnPredicateHook(stop_if_threshold_crossed_fn, run_every_secs,
                              run_every_steps,
                              check_fn=lambda: results.check_metric(metric_name))


def _stop_if_no_metric_improvement_hook(caller, evaluation, metric_name,
                                        max_steps_without_improvement,
                                        higher_is_better, eval_dir, min_steps,
                                        run_every_secs, run_every_steps):
  """A hook that stops when `metric_name` has not improved for N steps."""
  _check_common(caller, metric_name, min_steps, run_every_secs, run_every_steps)
  argument = ('max_steps_without_increase' if higher_is_better
              else 'max_steps_without_decrease')
  if not _is_non_negative_number(max_steps_without_improvement):
    raise ValueError(f'{caller} {argument} must be a non-negative number of global '
                     f'steps; got {max_steps_without_improvement!r}.')
  results = _EvalResults(evaluation, eval_dir, caller)
  is_lhs_better = operator.gt if higher_is_better else operator.lt
  increase_or_decrease = 'increase' if higher_is_better else 'decrease'

  def stop_if_no_metric_improvement_fn():
    """Returns `True` if metric does not improve within max steps."""
    best_val = None
    best_val_step = None
    for step, metrics in results.read().items():
      if step < min_steps:
        continue
      val = results.metric(metrics, step, metric_name)
      if best_val is None or is_lhs_better(val, best_val):
        best_val = val
        best_val_step = step
      if step - best_val_step >= max_steps_without_improvement:
        logging.info(
            'No %s in metric "%s" for %s steps, which is greater than or equal '
            'to max steps (%s) configured for early stopping.',
            increase_or_decrease, metric_name, step - best_val_step,
            max_steps_without_improvement)
        return True
    return False

  return _StopOnPredicateHook(stop_if_no_metric_improvement_fn, run_every_secs,
                              run_every_steps,
                              check_fn=lambda: results.check_metric(metric_name))


_SOURCE_DOC = """Where evaluation results come from: an `EvaluationHook`
      (place it before this hook; it holds this session's evaluations only), or
      a directory of event files (Estimator's `estimator.eval_dir()`, an
      EvaluationHook's `<summary_dir>/<name>`, which also hold the evaluations of
      earlier runs of a resumed job, as Estimator's eval directory did). None
      when `eval_dir` is given."""


def stop_if_higher_hook(evaluation, metric_name, threshold, eval_dir=None,
                        min_steps=0, run_every_secs=60, run_every_steps=None):
  """Creates a hook to stop if the given metric is higher than the threshold.

  Usage example:

    evaluation = tfmon.train.EvaluationHook(eval_step, dataset, every_n_steps=100)
    # Stop if accuracy becomes higher than 0.9.
    hook = tfmon.train.stop_if_higher_hook(evaluation, 'accuracy', 0.9,
                                           run_every_secs=None, run_every_steps=100)

  Args:
    evaluation: {source}
    metric_name: `str`, metric to track. "loss", "accuracy", etc.
    threshold: Numeric threshold for the given metric.
    eval_dir: If set, directory containing summary files with eval metrics
      (instead of `evaluation`).
    min_steps: `int`, stop is never requested if global step is less than this
      value. Defaults to 0.
    run_every_secs: If specified, calls `should_stop_fn` at an interval of
      `run_every_secs` seconds. Defaults to 60 seconds. Either this or
      `run_every_steps` must be set.
    run_every_steps: If specified, calls `should_stop_fn` every
      `run_every_steps` steps. Either this or `run_every_secs` must be set.

  Returns:
    An early-stopping hook of type `SessionRunHook` that periodically checks
    if the given metric is higher than specified threshold and initiates
    early stopping if true.

  Raises:
    TypeError: a source that is neither an EvaluationHook nor a directory, or a
      non-numeric threshold.
    ValueError: both or neither of `run_every_secs` and `run_every_steps`, both
      `evaluation` and `eval_dir`, or a bad `min_steps`. A `metric_name` the
      evaluation does not report raises ValueError when the session is created
      (EvaluationHook source placed first) or when the results are read.
  """
  return _stop_if_threshold_crossed_hook(
      'stop_if_higher_hook', evaluation, metric_name, threshold, True, eval_dir,
      min_steps, run_every_secs, run_every_steps)


def stop_if_lower_hook(evaluation, metric_name, threshold, eval_dir=None,
                       min_steps=0, run_every_secs=60, run_every_steps=None):
  """Creates a hook to stop if the given metric is lower than the threshold.

  Usage example:

    # Stop if loss becomes lower than 100.
    hook = tfmon.train.stop_if_lower_hook(evaluation, 'loss', 100)

  Args:
    evaluation: {source}
    metric_name: `str`, metric to track. "loss", "accuracy", etc.
    threshold: Numeric threshold for the given metric.
    eval_dir: If set, directory containing summary files with eval metrics
      (instead of `evaluation`).
    min_steps: `int`, stop is never requested if global step is less than this
      value. Defaults to 0.
    run_every_secs: If specified, calls `should_stop_fn` at an interval of
      `run_every_secs` seconds. Defaults to 60 seconds. Either this or
      `run_every_steps` must be set.
    run_every_steps: If specified, calls `should_stop_fn` every
      `run_every_steps` steps. Either this or `run_every_secs` must be set.

  Returns:
    An early-stopping hook of type `SessionRunHook` that periodically checks
    if the given metric is lower than specified threshold and initiates
    early stopping if true.

  Raises:
    As `stop_if_higher_hook`.
  """
  return _stop_if_threshold_crossed_hook(
      'stop_if_lower_hook', evaluation, metric_name, threshold, False, eval_dir,
      min_steps, run_every_secs, run_every_steps)


def stop_if_no_increase_hook(evaluation, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Creates a hook to stop if metric does not increase within given max steps.

  Usage example:

    # Stop if accuracy does not increase in 1000 steps.
    hook = tfmon.train.stop_if_no_increase_hook(evaluation, 'accuracy', 1000)

  Args:
    evaluation: {source}
    metric_name: `str`, metric to track. "loss", "accuracy", etc.
    max_steps_without_increase: `int`, maximum number of training steps with no
      increase in the given metric.
    eval_dir: If set, directory containing summary files with eval metrics
      (instead of `evaluation`).
    min_steps: `int`, stop is never requested if global step is less than this
      value. Defaults to 0.
    run_every_secs: If specified, calls `should_stop_fn` at an interval of
      `run_every_secs` seconds. Defaults to 60 seconds. Either this or
      `run_every_steps` must be set.
    run_every_steps: If specified, calls `should_stop_fn` every
      `run_every_steps` steps. Either this or `run_every_secs` must be set.

  Returns:
    An early-stopping hook of type `SessionRunHook` that periodically checks
    if the given metric shows no increase over given maximum number of
    training steps, and initiates early stopping if true.

  Raises:
    As `stop_if_higher_hook`; also ValueError for a negative or non-numeric
    `max_steps_without_increase`.
  """
  return _stop_if_no_metric_improvement_hook(
      'stop_if_no_increase_hook', evaluation, metric_name,
      max_steps_without_increase, True, eval_dir, min_steps, run_every_secs,
      run_every_steps)


def stop_if_no_decrease_hook(evaluation, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Creates a hook to stop if metric does not decrease within given max steps.

  Usage example:

    # Stop if loss does not decrease in 1000 steps.
    hook = tfmon.train.stop_if_no_decrease_hook(evaluation, 'loss', 1000)

  Args:
    evaluation: {source}
    metric_name: `str`, metric to track. "loss", "accuracy", etc.
    max_steps_without_decrease: `int`, maximum number of training steps with no
      decrease in the given metric.
    eval_dir: If set, directory containing summary files with eval metrics
      (instead of `evaluation`).
    min_steps: `int`, stop is never requested if global step is less than this
      value. Defaults to 0.
    run_every_secs: If specified, calls `should_stop_fn` at an interval of
      `run_every_secs` seconds. Defaults to 60 seconds. Either this or
      `run_every_steps` must be set.
    run_every_steps: If specified, calls `should_stop_fn` every
      `run_every_steps` steps. Either this or `run_every_secs` must be set.

  Returns:
    An early-stopping hook of type `SessionRunHook` that periodically checks
    if the given metric shows no decrease over given maximum number of
    training steps, and initiates early stopping if true.

  Raises:
    As `stop_if_higher_hook`; also ValueError for a negative or non-numeric
    `max_steps_without_decrease`.
  """
  return _stop_if_no_metric_improvement_hook(
      'stop_if_no_decrease_hook', evaluation, metric_name,
      max_steps_without_decrease, False, eval_dir, min_steps, run_every_secs,
      run_every_steps)


for _factory in (stop_if_higher_hook, stop_if_lower_hook, stop_if_no_increase_hook,
                 stop_if_no_decrease_hook):
  _factory.__doc__ = _factory.__doc__.replace('{source}', _SOURCE_DOC)
del _factory
