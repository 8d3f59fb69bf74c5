"""KerasCallbackHook: Keras callbacks inside a tfmon session.

Each run is a Keras batch: the hook fetches the names its callbacks log (keys
of the dict the step returns) and calls `on_train_batch_begin/end` with them,
averaged over the epoch so far as Keras' `fit` reports its metrics. Session
creation is `on_train_begin`, `end()` (also when the data runs out) is
`on_train_end`. Epochs end every `steps_per_epoch` runs, or, without it, when
the session ends. A callback that sets `model.stop_training` (EarlyStopping,
TerminateOnNaN) requests the session's stop.
"""

import keras
import numpy as np

from tfmon.hook_api import SessionRunArgs, SessionRunHook

# Callbacks that use the model itself, and what for.
_NEEDS_MODEL = {
    keras.callbacks.ModelCheckpoint: 'it saves the model',
    keras.callbacks.ReduceLROnPlateau: "it sets the model's optimizer's learning rate",
    keras.callbacks.TensorBoard: "it reads the model's optimizer and layers",
}


def _refusal(callback, model):
  """Why `callback` cannot work in a tfmon session, or None."""
  if isinstance(callback, keras.callbacks.BackupAndRestore):
    return (
        'BackupAndRestore restores the model and the epoch it was in from its '
        'backup_dir, but a tfmon session resumes from its checkpoint_dir, global step '
        'included: the two would disagree. Use MonitoredTrainingSession('
        "checkpoint_dir=..., checkpoint={'model': model, 'optimizer': optimizer}) "
        'or a CheckpointSaverHook: a restarted job resumes where it was saved.')
  if isinstance(callback, keras.callbacks.History):
    return None
  for cls, reason in _NEEDS_MODEL.items():
    if isinstance(callback, cls) and model is None:
      return f'{reason}: pass KerasCallbackHook(callbacks, model=model).'
  if (isinstance(callback, keras.callbacks.EarlyStopping) and
      callback.restore_best_weights and model is None):
    return ('restore_best_weights=True sets the weights of the model: pass '
            'KerasCallbackHook(callbacks, model=model).')
  if (isinstance(callback, (keras.callbacks.ReduceLROnPlateau,
                            keras.callbacks.TensorBoard)) and
      getattr(model, 'optimizer', None) is None):
    return ("it needs model.optimizer, the optimizer the step applies: compile the "
            'model with it (model.compile(optimizer=optimizer)) before the session.')
  return None


class _ModelStandIn:
  """What callbacks that only stop training see as `model` when none is given."""

  def __init__(self):
    self.stop_training = False


class KerasCallbackHook(SessionRunHook):
  """Runs Keras callbacks inside a MonitoredSession, as `Model.fit` runs them.

  ```python
  hook = tfmon.train.KerasCallbackHook(
      [keras.callbacks.CSVLogger('/tmp/train/log.csv'),
       keras.callbacks.EarlyStopping('loss', patience=2),
       keras.callbacks.ModelCheckpoint('/tmp/train/best.keras', 'loss',
                                       save_best_only=True)],
      model=model, steps_per_epoch=100)
  ```

  The callbacks' logs are the step's returned names `logs` (by default 'loss'
  and every name a callback monitors), averaged over the epoch so far, as
  `fit` gives its metrics. Covered: ModelCheckpoint, EarlyStopping,
  TensorBoard, CSVLogger, TerminateOnNaN, ReduceLROnPlateau, ProgbarLogger and
  your own callbacks. BackupAndRestore is refused: the session's checkpoint
  restores the job. Callbacks monitoring validation metrics (`val_loss`, the
  default of EarlyStopping, ReduceLROnPlateau and ModelCheckpoint) need the
  step to return that name: a session runs no validation.

  Args:
    callbacks: A list of `keras.callbacks.Callback`s.
    model: The Keras model the step trains: needed by callbacks that save it,
      change its optimizer or restore its weights.
    steps_per_epoch: Runs per epoch; None: one epoch, ended with the session
      (when the data runs out, or a hook stops it).
    logs: Names of the dict the step returns that the callbacks get; None:
      'loss' and every `monitor` of the callbacks.

  Raises:
    TypeError: for a callback that is not a Keras callback, or a bad argument.
    ValueError: for a callback that cannot work in a session (the message says
      why and what to use), or a bad `steps_per_epoch`.
  """

  def __init__(self, callbacks, model=None, steps_per_epoch=None, logs=None):
    if isinstance(callbacks, keras.callbacks.Callback) or not isinstance(
        callbacks, (list, tuple)):
      raise TypeError(f'KerasCallbackHook callbacks={callbacks!r} must be a list of '
                      'Keras callbacks: pass callbacks=[callback].')
    for i, callback in enumerate(callbacks):
      if not isinstance(callback, keras.callbacks.Callback):
        raise TypeError(
            f'KerasCallbackHook callbacks[{i}] is {callback!r} of type '
            f'{type(callback).__name__}, not a keras.callbacks.Callback. '
            'SessionRunHooks go in the session\'s hooks directly.')
      reason = _refusal(callback, model)
      if reason is not None:
        raise ValueError(f'KerasCallbackHook cannot run callbacks[{i}], '
                         f'{type(callback).__name__}: {reason}')
    if model is not None and not isinstance(model, keras.Model):
      raise TypeError(f'KerasCallbackHook model={model!r} must be a keras.Model '
                      '(the model the step trains), or None.')
    if steps_per_epoch is not None and (
        isinstance(steps_per_epoch, bool) or not isinstance(steps_per_epoch, int) or
        steps_per_epoch < 1):
      raise ValueError(f'KerasCallbackHook steps_per_epoch={steps_per_epoch!r} must '
                       'be a positive int (runs per epoch), or None for one epoch '
                       'that ends with the session.')
    if logs is None:
      logs = ['loss'] + [c.monitor for c in callbacks
                         if isinstance(getattr(c, 'monitor', None), str)]
    if isinstance(logs, str) or not all(isinstance(n, str) for n in logs):
      raise TypeError(f"KerasCallbackHook logs={logs!r} must be a list of names the "
                      "step returns, such as ['loss', 'accuracy'].")
    self._names = {name: name for name in dict.fromkeys(logs)}
    self._callbacks = list(callbacks)
    self._model = model if model is not None else _ModelStandIn()
    self._steps_per_epoch = steps_per_epoch
    self._epoch = 0  # continues across sessions of the same hook

  def begin(self):
    self._list = keras.callbacks.CallbackList(
        self._callbacks, add_history=False, add_progbar=False,
        verbose=1, epochs=1, steps=self._steps_per_epoch)
    self._list.set_model(self._model)  # CallbackList skips a stand-in's set_model
    self._in_epoch = False
    self._batch = 0
    self._sums = None
    self._logs = {}

  def after_create_session(self, session, coord):
    self._model.stop_training = False
    self._list.on_train_begin()

  def before_run(self, run_context):
    if not self._in_epoch:
      self._list.on_epoch_begin(self._epoch)
      self._in_epoch = True
      self._batch = 0
      self._sums = dict.fromkeys(self._names, 0.0)
    self._list.on_train_batch_begin(self._batch)
    return SessionRunArgs(self._names)

  def after_run(self, run_context, run_values):
    for name, value in run_values.results.items():
      self._sums[name] += float(np.mean(value))
    self._batch += 1
    self._logs = {name: total / self._batch for name, total in self._sums.items()}
    self._list.on_train_batch_end(self._batch - 1, dict(self._logs))
    if self._steps_per_epoch is not None and self._batch == self._steps_per_epoch:
      self._end_epoch()
    if self._model.stop_training:
      run_context.request_stop()

  def _end_epoch(self):
    self._list.on_epoch_end(self._epoch, dict(self._logs))
    self._epoch += 1
    self._in_epoch = False

  def end(self, session):
    if self._in_epoch and self._batch:
      self._end_epoch()
    self._list.on_train_end(dict(self._logs))
