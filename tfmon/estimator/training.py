"""TrainSpec, EvalSpec and train_and_evaluate, as tf.estimator's local training ran them."""

import collections

import tensorflow as tf

from tfmon import arg_checks


class TrainSpec(collections.namedtuple(
    'TrainSpec', ['input_fn', 'max_steps', 'hooks', 'saving_listeners'])):
  """What `train_and_evaluate` trains: `input_fn`, until `max_steps`, with `hooks`."""

  def __new__(cls, input_fn, max_steps=None, hooks=None, saving_listeners=None):
    if not callable(input_fn):
      raise TypeError(f'TrainSpec input_fn={input_fn!r} must be callable.')
    if max_steps is not None and max_steps <= 0:
      raise ValueError(f'Must specify max_steps > 0, given: {max_steps}')
    hooks = tuple(arg_checks.check_list_of(
        hooks, tf.compat.v1.train.SessionRunHook, 'TrainSpec hooks', 'hook'))
    listeners = tuple(arg_checks.check_list_of(
        saving_listeners, tf.compat.v1.train.CheckpointSaverListener,
        'TrainSpec saving_listeners', 'listener'))
    return super().__new__(cls, input_fn, max_steps, hooks, listeners)


class EvalSpec(collections.namedtuple(
    'EvalSpec', ['input_fn', 'steps', 'name', 'hooks', 'exporters',
                 'start_delay_secs', 'throttle_secs'])):
  """How `train_and_evaluate` evaluates: after a checkpoint, at most every
  `throttle_secs`, and once at the end of training."""

  def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None,
              start_delay_secs=120, throttle_secs=600):
    if not callable(input_fn):
      raise TypeError(f'EvalSpec input_fn={input_fn!r} must be callable.')
    if steps is not None and steps <= 0:
      raise ValueError(f'Must specify steps > 0, given: {steps}')
    if throttle_secs < 0:
      raise ValueError(f'Must specify throttle_secs >= 0, given: {throttle_secs}')
    if exporters:
      raise ValueError(
          f'EvalSpec exporters={exporters!r}: exporters are not supported by '
          'tfmon.estimator yet. Leave them out; the checkpoints in model_dir hold '
          'the model.')
    hooks = tuple(arg_checks.check_list_of(
        hooks, tf.compat.v1.train.SessionRunHook, 'EvalSpec hooks', 'hook'))
    return super().__new__(cls, input_fn, steps, name, hooks, (),
                           start_delay_secs, throttle_secs)


class _EvaluateAfterSave(tf.compat.v1.train.CheckpointSaverListener):
  """Evaluates a new checkpoint at most every `throttle_secs`, skipping the
  one saved at creation, and the last one at the end, as tf.estimator did."""

  def __init__(self, estimator, eval_spec):
    self._estimator = estimator
    self._eval_spec = eval_spec
    self.eval_result = None

  def begin(self):
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=self._eval_spec.throttle_secs)
    self._first = True

  def after_save(self, session, global_step_value):
    del session
    if self._first:
      self._first = False
      return
    if self._timer.should_trigger_for_step(global_step_value):
      self._evaluate(global_step_value)

  def end(self, session, global_step_value):
    del session
    if global_step_value != self._timer.last_triggered_step():
      self._evaluate(global_step_value)

  def _evaluate(self, global_step_value):
    self._timer.update_last_triggered_step(global_step_value)
    spec = self._eval_spec
    self.eval_result = self._estimator.evaluate(
        spec.input_fn, steps=spec.steps, hooks=spec.hooks, name=spec.name)


def train_and_evaluate(estimator, train_spec, eval_spec):
  """Trains `estimator` and evaluates it after its checkpoints, locally.

  Returns:
    `(the last evaluation's results, [])`: exporters are not supported.

  Raises:
    TypeError: specs of the wrong types.
  """
  if not isinstance(train_spec, TrainSpec):
    raise TypeError(f'train_spec must be a tfmon.estimator.TrainSpec; got {train_spec!r}.')
  if not isinstance(eval_spec, EvalSpec):
    raise TypeError(f'eval_spec must be a tfmon.estimator.EvalSpec; got {eval_spec!r}.')
  listener = _EvaluateAfterSave(estimator, eval_spec)
  estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                  max_steps=train_spec.max_steps,
                  saving_listeners=list(train_spec.saving_listeners) + [listener])
  return listener.eval_result, []
