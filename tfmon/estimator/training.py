"""TrainSpec, EvalSpec and train_and_evaluate, as tf.estimator ran them: in
one process, or (TF_CONFIG, train_distribute=MultiWorkerMirroredStrategy)
training in each worker process and evaluating in the evaluator task."""

import collections
import os
import time

import tensorflow as tf

from tfmon import arg_checks
from tfmon import workers
from tfmon import tf_logging as logging
from tfmon.estimator import exporter as exporter_lib
from tfmon.estimator import run_config


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
    exporters = _check_exporters(exporters)
    hooks = tuple(arg_checks.check_list_of(
        hooks, tf.compat.v1.train.SessionRunHook, 'EvalSpec hooks', 'hook'))
    return super().__new__(cls, input_fn, steps, name, hooks, exporters,
                           start_delay_secs, throttle_secs)


def _check_exporters(exporters):
  """`exporters` (None, an Exporter, or an iterable of them) as a tuple.

  Raises:
    TypeError: an item that is not an Exporter.
    ValueError: a name that is empty, not a string, or not unique.
  """
  if not exporters:
    return ()
  if isinstance(exporters, exporter_lib.Exporter):
    exporters = [exporters]
  try:
    exporters = list(exporters)
  except TypeError:
    raise TypeError(f'EvalSpec exporters={exporters!r} must be an Exporter, an '
                    'iterable of Exporters, or None.') from None
  names = []
  for i, exporter in enumerate(exporters):
    if not isinstance(exporter, exporter_lib.Exporter):
      raise TypeError(
          f'EvalSpec exporters[{i}] is {exporter!r} of type {type(exporter).__name__}, '
          'not an Exporter: use tfmon.estimator.LatestExporter, BestExporter or '
          'FinalExporter (or a subclass of tfmon.estimator.Exporter).')
    if not exporter.name or not isinstance(exporter.name, str):
      raise ValueError(f'An Exporter must have a non-empty string name (its directory '
                       f'under model_dir/export); exporters[{i}] has {exporter.name!r}.')
    if exporter.name in names:
      raise ValueError(f'`exporters` must have unique names: {exporter.name!r} is '
                       f'given twice. All exporter names: {[e.name for e in exporters]}')
    names.append(exporter.name)
  return tuple(exporters)


class _EvaluateAfterSave(tf.compat.v1.train.CheckpointSaverListener):
  """Evaluates a new checkpoint at most every `throttle_secs`, skipping the
  one saved at creation, and the last one at the end, then runs the
  exporters on it, as tf.estimator did."""

  def __init__(self, estimator, eval_spec, max_steps):
    self._estimator = estimator
    self._eval_spec = eval_spec
    self._max_steps = max_steps
    self.eval_result = None
    self.export_results = None  # None until an evaluation, as TF1's

  def begin(self):
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=self._eval_spec.throttle_secs)
    self._first = True
    self._previous_checkpoint = None

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
    checkpoint = self._estimator.latest_checkpoint()
    if checkpoint == self._previous_checkpoint:
      logging.warning(_SAME_CHECKPOINT)
      return
    self._previous_checkpoint = checkpoint
    self.eval_result, self.export_results = _evaluate_and_export(
        self._estimator, self._eval_spec, self._max_steps, checkpoint)


_SAME_CHECKPOINT = ('No new checkpoint ready for evaluation. Skip the current '
                    'evaluation pass as evaluation results are expected to be same '
                    'for the same checkpoint.')


def _evaluate_and_export(estimator, eval_spec, max_steps, checkpoint):
  """Evaluates `checkpoint` and runs the exporters on it: `(results, exports)`."""
  result = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps,
                              hooks=eval_spec.hooks, name=eval_spec.name,
                              checkpoint_path=checkpoint)
  # TF1's rule: final when the evaluated step reached max_steps (never without it).
  is_the_final_export = bool(max_steps) and result['global_step'] >= max_steps
  export_dir_base = os.path.join(estimator.model_dir, 'export')
  return result, [
      exporter.export(estimator, os.path.join(export_dir_base, exporter.name),
                      checkpoint, result, is_the_final_export)
      for exporter in eval_spec.exporters]


def _evaluate_continuously(estimator, train_spec, eval_spec):
  """An evaluator task's loop, as TF's `_TrainingExecutor.run_evaluator`: each
  new checkpoint the workers save, at most every `throttle_secs`, until one
  reaches `train_spec.max_steps` (without it, for good)."""
  if eval_spec.start_delay_secs:
    logging.info('Waiting %f secs before starting eval.', eval_spec.start_delay_secs)
    time.sleep(eval_spec.start_delay_secs)
  previous = None
  while True:
    start = time.time()
    checkpoint = estimator.latest_checkpoint()
    if checkpoint is None:
      logging.info('Estimator is not trained yet. Will start an evaluation when a '
                   'checkpoint is ready.')
    elif checkpoint == previous:
      logging.warning(_SAME_CHECKPOINT)
    else:
      previous = checkpoint
      result, exports = _evaluate_and_export(estimator, eval_spec, train_spec.max_steps,
                                             checkpoint)
      if train_spec.max_steps and result['global_step'] >= train_spec.max_steps:
        logging.info('Exiting evaluation, global_step=%s >= train max_steps=%s',
                     result['global_step'], train_spec.max_steps)
        return result, exports
    delay = eval_spec.throttle_secs - (time.time() - start)
    if delay > 0:
      logging.info('Waiting %f secs before starting next eval run.', delay)
      time.sleep(delay)


def train_and_evaluate(estimator, train_spec, eval_spec):
  """Trains `estimator`, evaluating and exporting after its checkpoints, locally.

  Returns:
    `(the last evaluation's results, the last evaluation's exports)`: each
    exporter's export directory (or None where it did not export), in
    `eval_spec.exporters`' order; `(None, None)` if nothing was evaluated.

  Raises:
    TypeError: specs of the wrong types.
  """
  if not isinstance(train_spec, TrainSpec):
    raise TypeError(f'train_spec must be a tfmon.estimator.TrainSpec; got {train_spec!r}.')
  if not isinstance(eval_spec, EvalSpec):
    raise TypeError(f'eval_spec must be a tfmon.estimator.EvalSpec; got {eval_spec!r}.')
  config = estimator.config
  if config.task_type == run_config.TaskType.EVALUATOR:
    return _evaluate_continuously(estimator, train_spec, eval_spec)
  if workers.count(config.train_distribute) > 1:
    # Each worker trains; the evaluator task evaluates, as TF 2.15 split them.
    logging.info('Running train_and_evaluate on %s of %d workers: it trains; an '
                 'evaluator task in TF_CONFIG evaluates the checkpoints.',
                 workers.name(config.train_distribute), config.num_worker_replicas)
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                    max_steps=train_spec.max_steps,
                    saving_listeners=list(train_spec.saving_listeners))
    return None, None
  listener = _EvaluateAfterSave(estimator, eval_spec, train_spec.max_steps)
  estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                  max_steps=train_spec.max_steps,
                  saving_listeners=list(train_spec.saving_listeners) + [listener])
  return listener.eval_result, listener.export_results
