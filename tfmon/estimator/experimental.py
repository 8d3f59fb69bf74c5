"""tf.estimator.experimental: early stopping, in-memory evaluation, logit helpers.

The early-stopping hooks are tfmon.train's (hooks/early_stopping.py), given the
estimator's `eval_dir()` unless `eval_dir` is: Estimator's signature,
`(estimator, metric_name, threshold or max_steps, eval_dir=None, min_steps=0,
run_every_secs=60, run_every_steps=None)`.
"""

import functools
import inspect

import tensorflow as tf

from tfmon import arg_checks
from tfmon import train as tfmon_train
from tfmon.estimator import estimator as estimator_lib
from tfmon.hooks import early_stopping

__all__ = ['InMemoryEvaluatorHook', 'build_raw_supervised_input_receiver_fn',
           'call_logit_fn', 'make_early_stopping_hook',
           'make_stop_at_checkpoint_step_hook', 'stop_if_higher_hook',
           'stop_if_lower_hook', 'stop_if_no_decrease_hook', 'stop_if_no_increase_hook']


def _reading_eval_dir(hook_fn):
  """`hook_fn` with Estimator's signature: the estimator first (its eval dir
  read unless `eval_dir` is given), then `hook_fn`'s other arguments."""
  parameters = list(inspect.signature(hook_fn).parameters.values())
  signature = inspect.Signature(
      [parameters[0].replace(name='estimator')] + parameters[1:])

  @functools.wraps(hook_fn)
  def hook(*args, **kwargs):
    arguments = signature.bind(*args, **kwargs).arguments
    estimator = arguments.pop('estimator')
    eval_dir = arguments.pop('eval_dir', None)
    return hook_fn(eval_dir or estimator.eval_dir(), **arguments)

  hook.__signature__ = signature
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


def make_stop_at_checkpoint_step_hook(estimator, last_step,
                                      wait_after_file_check_secs=30):
  """Stops training at `last_step`: the chief's StopAtStepHook, as TF's.

  TF gave non-chief workers a hook waiting for the chief's checkpoint of
  `last_step`; a tfmon Estimator trains in one process, its chief.
  """
  del wait_after_file_check_secs  # for non-chief workers' polling
  if not isinstance(estimator, estimator_lib.Estimator):
    raise TypeError(f'estimator={estimator!r} must be a tfmon.estimator.Estimator.')
  return tfmon_train.StopAtStepHook(last_step=last_step)


class InMemoryEvaluatorHook(tf.compat.v1.train.SessionRunHook):
  """Evaluates the model being trained when its session starts, every
  `every_n_iter` runs, and at the end, from the training session's variable
  values (no checkpoint), as TF's.

  Each evaluation builds `estimator`'s EVAL graph, gives its global variables
  the training graph's values by name, runs `input_fn` for `steps` batches
  (None: until the data runs out), and writes the results to
  `estimator.eval_dir(name)`, as `Estimator.evaluate` does.

  Args:
    estimator: The `tfmon.estimator.Estimator` being trained.
    input_fn: The evaluation's input_fn, as for `evaluate`.
    steps: Batches per evaluation (None: until the data runs out).
    hooks: `SessionRunHook`s of the evaluation.
    name: Evaluations of another name go to `eval_<name>`.
    every_n_iter: Evaluate every this many training runs.

  Raises:
    ValueError: `every_n_iter` not positive.
    TypeError: an `estimator` that is not a tfmon Estimator, or hooks that are
      not SessionRunHooks.
  """

  def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None,
               every_n_iter=100):
    if every_n_iter is None or every_n_iter <= 0:
      raise ValueError(f'every_n_iter should be a positive number, given: '
                       f'{every_n_iter}')
    if not isinstance(estimator, estimator_lib.Estimator):
      raise TypeError(f'estimator={estimator!r} must be a tfmon.estimator.Estimator.')
    self._estimator = estimator
    self._input_fn = input_fn
    self._steps = steps
    self._hooks = list(arg_checks.check_list_of(
        hooks, tf.compat.v1.train.SessionRunHook, 'hooks', 'hook') or [])
    self._name = name
    self._every_n_iter = every_n_iter

  def begin(self):
    self._timer = tf.compat.v1.train.SecondOrStepTimer(every_steps=self._every_n_iter)
    self._iterations = 0
    self._variables = {v.name.split(':')[0]: v
                       for v in tf.compat.v1.global_variables()}

  def after_create_session(self, session, coord):
    self._evaluate(session)

  def after_run(self, run_context, run_values):
    self._iterations += 1
    if self._timer.should_trigger_for_step(self._iterations):
      self._evaluate(run_context.session)

  def end(self, session):
    self._evaluate(session)

  def _evaluate(self, session):
    self._timer.update_last_triggered_step(self._iterations)
    names = list(self._variables)
    values = dict(zip(names, session.run([self._variables[n] for n in names])))
    self._estimator._evaluate(  # pylint: disable=protected-access
        self._input_fn, self._steps, self._hooks, None, self._name,
        variable_values=values)


def call_logit_fn(logit_fn, features, mode, params, config):
  """Calls `logit_fn` with those of `features`, `mode`, `params`, `config` it
  names, as TF's.

  Returns:
    The logits: a Tensor, or a dict of them.

  Raises:
    ValueError: a `logit_fn` without `features`, or returning something else.
  """
  arguments = inspect.signature(logit_fn).parameters
  if 'features' not in arguments:
    raise ValueError(f'logit_fn should have features argument: {logit_fn}.')
  available = {'mode': mode, 'params': params, 'config': config}
  logits = logit_fn(features=features,
                    **{k: v for k, v in available.items() if k in arguments})
  if isinstance(logits, dict):
    for key, value in logits.items():
      if not isinstance(value, tf.Tensor):
        raise ValueError(f'logit_fn should return a Tensor or a dictionary mapping '
                         f'strings to Tensors.  logit_fn returned: {logits}; '
                         f'{key!r} is not a Tensor.')
  elif not isinstance(logits, tf.Tensor):
    raise ValueError('logit_fn should return a Tensor or a dictionary mapping '
                     f'strings to Tensors.  logit_fn returned: {logits}')
  return logits


def build_raw_supervised_input_receiver_fn(features, labels, default_batch_size=None):
  """Refused: it builds the TRAIN and EVAL receivers of
  `experimental_export_all_saved_models`, which exports the PREDICT graph only.

  Raises:
    NotImplementedError: always, naming the fix.
  """
  del features, labels, default_batch_size
  raise NotImplementedError(
      'build_raw_supervised_input_receiver_fn builds receivers for TRAIN and EVAL '
      'SavedModels (TF1 graphs for TF1 sessions), which tfmon does not export: '
      'export the PREDICT graph with tfmon.estimator.export.'
      'build_raw_serving_input_receiver_fn, and train or evaluate from model_dir.')


# tf.estimator.experimental (and tf.compat.v1's) names tfmon does not provide.
_NOT_PROVIDED = {
    'LinearSDCA': ('the SDCA optimizer of linear estimators is not provided (its '
                   'ops left TensorFlow): train LinearClassifier or '
                   'LinearRegressor with their default Ftrl optimizer'),
    'RNNClassifier': ('RNN estimators are not provided (they were built on Keras 2 '
                      'recurrent layers and sequence feature columns): write the RNN '
                      'in a model_fn, or train a Keras model with fit'),
    'RNNEstimator': ('RNN estimators are not provided (they were built on Keras 2 '
                     'recurrent layers and sequence feature columns): write the RNN '
                     'in a model_fn, or train a Keras model with fit'),
    'KMeans': ('the KMeans estimator is not provided: cluster with '
               "scikit-learn's KMeans, or write the clustering step in a model_fn"),
}


def dnn_logit_fn_builder(units, hidden_units, feature_columns, activation_fn, dropout,
                         input_layer_partitioner, batch_norm):
  """`logit_fn(features, mode)`: the premade DNN's network in the current
  variable scope, as TF 2.15's builder made it (its estimators entered 'dnn')."""
  from tfmon.estimator.canned import dnn  # pylint: disable=import-outside-toplevel

  def dnn_logit_fn(features, mode):
    return dnn.dnn_logits(features, mode, units, hidden_units, feature_columns,
                          activation_fn, dropout, batch_norm, scope=None,
                          input_layer_partitioner=input_layer_partitioner)[0]
  return dnn_logit_fn


def linear_logit_fn_builder(units, feature_columns, sparse_combiner='sum'):
  """`logit_fn(features)`: the premade linear model in the current variable
  scope, as TF 2.15's builder made it (its estimators entered 'linear')."""
  from tfmon.estimator.canned import linear  # pylint: disable=import-outside-toplevel

  def linear_logit_fn(features):
    return linear.linear_logits(features, units, feature_columns, sparse_combiner,
                                scope=None)[0]
  return linear_logit_fn


def __getattr__(name):
  if name in _NOT_PROVIDED:
    raise AttributeError(f'tfmon.estimator.experimental has no {name}: '
                         f'{_NOT_PROVIDED[name]}.')
  raise AttributeError(f"module 'tfmon.estimator.experimental' has no attribute "
                       f'{name!r}')
