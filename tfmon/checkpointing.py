"""Checkpointing on tf.train.Checkpoint and tf.train.CheckpointManager.

What Scaffold's `checkpoint` (alias `saver`) takes becomes one `tf.train.Checkpoint`
that always holds the global step; `restore` restores it at session creation and
`CheckpointWriter` saves it with v1's file names, never leaving a half-written
checkpoint where the `checkpoint` state file points.

A tf.data iterator in the checkpoint (`{'model': m, 'optimizer': o, 'iterator':
iter(dataset)}`) is saved with its position, shuffle buffer and random state, so a
resumed run continues with the next unseen batch (Estimator's
CheckpointInputPipelineHook, for any tf.data pipeline). Distributed iterators
cannot be checkpointed by TensorFlow and are refused with a message.
"""

import os
import sys

from absl import logging
import tensorflow as tf

from tfmon import training_util

_ONLY_GLOBAL_STEP_WARNING = (
    'Checkpoints will hold only the global step: nothing else was given to save. '
    "Pass checkpoint={'model': model, 'optimizer': optimizer} (a dict of "
    'trackables, a tf.train.Checkpoint or a tf.train.CheckpointManager) to '
    'MonitoredTrainingSession, Scaffold or CheckpointSaverHook(saver=...).')


def check_checkpoint_arg(value, arg_name='checkpoint'):
  """Raises TypeError unless `value` is something `as_checkpoint` takes."""
  if value is None or isinstance(value, (tf.train.Checkpoint, tf.train.CheckpointManager)):
    return
  if isinstance(value, dict):
    for key, trackable in value.items():
      if isinstance(trackable, tf.distribute.DistributedIterator):
        raise TypeError(
            f'{arg_name}[{key!r}] is a distributed iterator, which TensorFlow cannot '
            'checkpoint (iterators of strategy.experimental_distribute_dataset or '
            'distribute_datasets_from_function are not trackable). Leave it out '
            'and, on resume, skip what was consumed before distributing: '
            'dataset.skip(batches_seen), or checkpoint iter(dataset) of the '
            'undistributed dataset instead.')
      if not isinstance(trackable, tf.__internal__.tracking.Trackable):
        raise TypeError(
            f'{arg_name}[{key!r}] = {trackable!r} of type {type(trackable).__name__} '
            'cannot be checkpointed: the values of a checkpoint dict are trackables '
            '(Keras models and optimizers, tf.Module, tf.Variable, and tf.data '
            'iterators made by iter(dataset); a Python generator or iterator is not).')
    return
  raise TypeError(
      f'{arg_name}={value!r} of type {type(value).__name__} cannot be '
      'checkpointed: pass a tf.train.Checkpoint, a tf.train.CheckpointManager or '
      "a dict of trackables such as {'model': model, 'optimizer': optimizer}.")


def as_checkpoint(value, arg_name='checkpoint'):
  """Returns `(tf.train.Checkpoint, CheckpointManager or None)` for `value`.

  Args:
    value: A `tf.train.Checkpoint`, a `tf.train.CheckpointManager`, a dict of
      trackables (`{'model': model, 'optimizer': optimizer}`), or None.
    arg_name: The argument's name, for error messages.

  Returns:
    The checkpoint, with the global step added when it exists, and the
    CheckpointManager if one was given (its directory and file name then win).

  Raises:
    TypeError: for anything else.
  """
  check_checkpoint_arg(value, arg_name)
  manager = None
  if isinstance(value, tf.train.CheckpointManager):
    manager = value
    checkpoint = value.checkpoint
  elif isinstance(value, tf.train.Checkpoint):
    checkpoint = value
  else:
    checkpoint = tf.train.Checkpoint(**(value or {}))
  global_step = training_util.get_global_step()
  if global_step is not None and getattr(checkpoint, 'global_step', None) is None:
    checkpoint.global_step = global_step  # v1 always saved the global step
  if not value:
    logging.warning(_ONLY_GLOBAL_STEP_WARNING)
  return checkpoint, manager


def require_created_in_scope(checkpoint):
  """Raises ValueError for a trainable variable of `checkpoint` that the strategy
  in scope did not create: replicas cannot update it, and TensorFlow
  fails at the first step with a bare AssertionError."""
  strategy = tf.distribute.get_strategy()
  for trackable in tf.train.TrackableView(checkpoint).descendants():
    variable = _tf_variable(trackable)
    if (variable is not None and variable.trainable and
        not strategy.extended.variable_created_in_scope(variable)):
      raise ValueError(
          f'Variable {variable.name!r} was created outside the scope of '
          f'{strategy!r}, which the session works under, so its replicas cannot '
          'update it. Create the model and optimizer inside '
          '`with strategy.scope():`.')


def _tf_variable(trackable):
  """The tf.Variable `trackable` is or (a Keras 3 variable) wraps, else None."""
  if isinstance(trackable, tf.Variable):
    return trackable
  keras = sys.modules.get('keras')  # a Keras variable exists only if Keras is loaded
  if keras is not None and isinstance(trackable, getattr(keras, 'Variable', ())):
    return trackable.value
  return None


def latest_checkpoint_path(checkpoint_dir=None, checkpoint_filename_with_path=None):
  """The checkpoint to restore: the explicit path, else the latest in the directory."""
  if checkpoint_filename_with_path:
    return checkpoint_filename_with_path
  if checkpoint_dir:
    return tf.train.latest_checkpoint(checkpoint_dir)
  return None


def restore(checkpoint, path):
  """Restores `checkpoint` from `path`, checking that what exists now matches.

  Objects created later (optimizer slots) are restored when they are created, as
  tf.train.Checkpoint does.

  Raises:
    ValueError: if the checkpoint does not fit the objects to restore.
  """
  logging.info('Restoring parameters from %s', path)
  try:
    status = checkpoint.restore(path)
    status.assert_existing_objects_matched()
  except (AssertionError, tf.errors.NotFoundError, ValueError) as e:
    raise ValueError(
        f'Checkpoint {path} does not fit what this session restores: {e}. Restore '
        'into the same model and optimizer that wrote it, or point checkpoint_dir '
        'at a new directory.') from e


class CheckpointWriter:
  """Saves a checkpoint as `<directory>/<basename>-<step>` via CheckpointManager.

  A save that fails part-way leaves the `checkpoint` state file and the previous
  checkpoints as they were, removes the partial files of the failed step (never
  those of a complete checkpoint), and raises an error naming what failed.

  Args:
    checkpoint: A `tf.train.Checkpoint`.
    manager: A `tf.train.CheckpointManager` to use as it is, or None.
    directory: Where checkpoints go when no manager is given.
    basename: The checkpoint file name (`model.ckpt`).
    max_to_keep: Checkpoints kept (None keeps all).
    keep_checkpoint_every_n_hours: Also keep one checkpoint per this many hours.
  """

  def __init__(self, checkpoint, manager=None, directory=None, basename='model.ckpt',
               max_to_keep=5, keep_checkpoint_every_n_hours=None):
    self.manager = manager or tf.train.CheckpointManager(
        checkpoint, directory=directory, max_to_keep=max_to_keep,
        keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
        checkpoint_name=basename)
    self.save_path = os.path.join(self.manager.directory, basename)
    if manager is not None:
      # The manager's own file name wins; it keeps it as its prefix.
      self.save_path = getattr(manager, '_checkpoint_prefix', self.save_path)

  def latest_step_saved(self):
    path = self.manager.latest_checkpoint
    return None if path is None else int(path.rsplit('-', 1)[-1])

  def save(self, step):
    prefix = f'{self.save_path}-{step}'
    try:
      return self.manager.save(checkpoint_number=step)
    except Exception as e:
      if prefix not in self.manager.checkpoints:
        _remove_partial_files(prefix)
      raise RuntimeError(
          f'Saving checkpoint for step {step} into {prefix} failed: {e}. The '
          f'checkpoint state was not changed: the latest checkpoint is still '
          f'{self.manager.latest_checkpoint}.') from e


def _remove_partial_files(prefix):
  """Removes what a failed save of `prefix` wrote (gfile: works on any filesystem)."""
  for path in tf.io.gfile.glob(prefix + '.*'):
    if not tf.io.gfile.isdir(path):
      tf.io.gfile.remove(path)
  for path in tf.io.gfile.glob(prefix + '_temp*'):
    tf.io.gfile.rmtree(path)
