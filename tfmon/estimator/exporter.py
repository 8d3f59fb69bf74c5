"""Exporters: what `train_and_evaluate` exports after each evaluation, as
tf.estimator's exporters did.

An exporter is asked after every evaluation, with the checkpoint evaluated and
its results, to export into `model_dir/export/<name>/`; each export is a
SavedModel directory named by its time (`Estimator.export_saved_model`):
  - LatestExporter exports every time, keeping the newest `exports_to_keep`;
  - BestExporter exports when `compare_fn` finds the evaluation better than
    the best so far. As TF1's, it reads the best so far from the event files at
    its first use, but its first export happens whatever they hold (and sets
    the best so far): a restarted job exports its first evaluation;
  - FinalExporter exports once, after the final evaluation (the one reaching
    TrainSpec.max_steps; with no max_steps there is none, as in TF1).
"""

import abc
import inspect
import os

import tensorflow as tf

from tfmon import tf_logging as logging
from tfmon.hooks import evaluation


class Exporter(abc.ABC):
  """A kind of export that `EvalSpec(exporters=...)` runs after evaluations."""

  @property
  @abc.abstractmethod
  def name(self):
    """The directory name under `model_dir/export` of this exporter's exports."""

  @abc.abstractmethod
  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    """Exports `estimator` (or not).

    Args:
      estimator: The `Estimator`.
      export_path: The directory in which to write exports.
      checkpoint_path: The checkpoint just evaluated.
      eval_result: What `Estimator.evaluate` returned for it.
      is_the_final_export: Whether the evaluation is the one at the end of
        training (its global step reached TrainSpec.max_steps).

    Returns:
      The export's directory, or None if it did not export.
    """


def _check_exports_to_keep(exports_to_keep):
  if exports_to_keep is not None and (
      not isinstance(exports_to_keep, int) or exports_to_keep <= 0):
    raise ValueError(f'`exports_to_keep`, if provided, must be a positive number. Got '
                     f'{exports_to_keep!r} (None keeps every export).')
  return exports_to_keep


def _garbage_collect_exports(export_dir_base, exports_to_keep):
  """Deletes all but the newest `exports_to_keep` exports in `export_dir_base`
  (directories named by a 10-digit time; None keeps all)."""
  if exports_to_keep is None or not tf.io.gfile.isdir(export_dir_base):
    return
  names = [name.rstrip('/') for name in tf.io.gfile.listdir(export_dir_base)]
  versions = sorted(int(name) for name in names if len(name) == 10 and name.isdigit())
  for version in versions[:-exports_to_keep]:
    path = os.path.join(export_dir_base, str(version))
    try:
      tf.io.gfile.rmtree(path)
    except tf.errors.NotFoundError as e:
      logging.warning('Can not delete %s recursively: %s', path, e)


class _SavedModelExporter(Exporter):
  """What the exporters share: a name, the arguments of
  `Estimator.export_saved_model`, and the exports kept. Subclasses decide when
  to call `_export`."""

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False,
               exports_to_keep=None):
    if not callable(serving_input_receiver_fn):
      raise TypeError(
          f'Exporter {name!r}: serving_input_receiver_fn={serving_input_receiver_fn!r} '
          'must be a function returning a tfmon.estimator.export.ServingInputReceiver, '
          'such as tfmon.estimator.export.build_parsing_serving_input_receiver_fn('
          'feature_spec).')
    self._name = name
    self._serving_input_receiver_fn = serving_input_receiver_fn
    self._assets_extra = assets_extra
    self._as_text = as_text
    self._exports_to_keep = _check_exports_to_keep(exports_to_keep)

  @property
  def name(self):
    return self._name

  def _export(self, estimator, export_path, checkpoint_path):
    """Exports, then deletes all but the newest `exports_to_keep` exports."""
    result = estimator.export_saved_model(
        export_path, self._serving_input_receiver_fn, assets_extra=self._assets_extra,
        as_text=self._as_text, checkpoint_path=checkpoint_path)
    _garbage_collect_exports(export_path, self._exports_to_keep)
    return result


class LatestExporter(_SavedModelExporter):
  """Exports after every evaluation, keeping the newest `exports_to_keep`.

  Args:
    name: This exporter's directory under `model_dir/export` (unique).
    serving_input_receiver_fn: As `Estimator.export_saved_model` takes.
    assets_extra: As `Estimator.export_saved_model` takes.
    as_text: As `Estimator.export_saved_model` takes.
    exports_to_keep: Exports kept (older ones are deleted); None keeps all.

  Raises:
    ValueError: `exports_to_keep` not positive.
    TypeError: a receiver fn that is not callable.
  """

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False,
               exports_to_keep=5):
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                     exports_to_keep)

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del eval_result, is_the_final_export
    return self._export(estimator, export_path, checkpoint_path)


class FinalExporter(_SavedModelExporter):
  """Exports once, after the final evaluation.

  Args:
    name: This exporter's directory under `model_dir/export` (unique).
    serving_input_receiver_fn: As `Estimator.export_saved_model` takes.
    assets_extra: As `Estimator.export_saved_model` takes.
    as_text: As `Estimator.export_saved_model` takes.
  """

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del eval_result
    if not is_the_final_export:
      return None
    logging.info('Performing the final export in the end of training.')
    return self._export(estimator, export_path, checkpoint_path)


def _loss_smaller(best_eval_result, current_eval_result):
  """Whether the current evaluation's `loss` is smaller than the best's.

  Raises:
    ValueError: a result that is empty or has no loss.
  """
  for name, result in (('best_eval_result', best_eval_result),
                       ('current_eval_result', current_eval_result)):
    if not result or 'loss' not in result:
      raise ValueError(f'{name} cannot be empty or no loss is found in it.')
  return best_eval_result['loss'] > current_eval_result['loss']


def _check_compare_fn(compare_fn):
  if compare_fn is None:
    raise ValueError('`compare_fn` must not be None.')
  arguments = set(inspect.signature(compare_fn).parameters)
  for required in ('best_eval_result', 'current_eval_result'):
    if required not in arguments:
      raise ValueError(f'compare_fn ({compare_fn}) must include {required} argument.')
  unexpected = sorted(arguments - {'best_eval_result', 'current_eval_result'})
  if unexpected:
    raise ValueError(f'compare_fn ({compare_fn}) has following not expected args: '
                     f'{unexpected}')
  return compare_fn


class BestExporter(_SavedModelExporter):
  """Exports when an evaluation is better than the best so far.

  Args:
    name: This exporter's directory under `model_dir/export` (unique).
    serving_input_receiver_fn: As `Estimator.export_saved_model` takes.
    event_file_pattern: The evaluations' event files, relative to `model_dir`,
      read at the first export for the best so far (None: start from none).
    compare_fn: `compare_fn(best_eval_result, current_eval_result)` returns
      whether the current is better; default: a smaller `loss`.
    assets_extra: As `Estimator.export_saved_model` takes.
    as_text: As `Estimator.export_saved_model` takes.
    exports_to_keep: Exports kept (older ones are deleted); None keeps all.

  Raises:
    ValueError: a `compare_fn` without those two arguments, or `exports_to_keep`
      not positive.
  """

  def __init__(self, name='best_exporter', serving_input_receiver_fn=None,
               event_file_pattern='eval/*.tfevents.*', compare_fn=_loss_smaller,
               assets_extra=None, as_text=False, exports_to_keep=5):
    self._compare_fn = _check_compare_fn(compare_fn)
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                     exports_to_keep)
    self._event_file_pattern = event_file_pattern
    self._model_dir = None
    self._best_eval_result = None
    self._has_exported = False

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del is_the_final_export
    if self._model_dir != estimator.model_dir and self._event_file_pattern:
      logging.info('Loading best metric from event files.')
      self._model_dir = estimator.model_dir
      self._best_eval_result = self._best_in_event_files(
          os.path.join(self._model_dir, self._event_file_pattern))
    # The first export happens whatever the event files hold, as TF1's did.
    if (self._best_eval_result is None or not self._has_exported or
        self._compare_fn(best_eval_result=self._best_eval_result,
                         current_eval_result=eval_result)):
      logging.info('Performing best model export.')
      self._best_eval_result = eval_result
      result = self._export(estimator, export_path, checkpoint_path)
      self._has_exported = True
      return result
    return None

  def _best_in_event_files(self, pattern):
    """The best evaluation in the event files matching `pattern`, or None.

    Read with the early-stopping hooks' reader (by directory, in step order).
    """
    best = None
    directories = sorted({os.path.dirname(f) for f in tf.io.gfile.glob(pattern)})
    for directory in directories:
      for result in evaluation.read_eval_metrics(directory).values():
        if best is None or self._compare_fn(best_eval_result=best,
                                            current_eval_result=result):
          best = result
    return best
