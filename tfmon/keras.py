"""HookCallback: tfmon's SessionRunHooks inside Keras `Model.fit`.

What `fit` calls, and what the hooks see (the MonitoredSession protocol, with
the model's train function as the step):

  - `on_train_begin`: the global step is resolved (below); every hook's
    `begin()`, then `after_create_session(session, coord)` with a tfmon
    `RawSession` (its `run` evaluates variables and callables, without hooks)
    and a `tf.train.Coordinator`.
  - Each call of the model's train function is a run: the callback replaces
    `model.train_function` for the fit with a wrapper that calls the hooks due
    (`before_run`), the train function, then their `after_run`. Hooks see the
    run from inside the call, not from `on_train_batch_*`: a callback that
    defines no batch-end method keeps Keras' asynchronous batch-end dispatch
    for the other callbacks, and an idle run costs a few Python calls.
  - Fetches resolve to: names -> the run's logs (what Keras hands callbacks:
    the compiled loss and metrics, averaged over the epoch so far);
    variables -> their value before the run (TF1's pre-step read; the global
    step is served from Python); callables -> one compiled call of a
    `RawSession` after the run, so they see post-step state.
  - `request_stop()` (or the coordinator's) sets `model.stop_training`, which
    `fit` checks after the batch.
  - `on_train_end`: every hook's `end(session)`. As under a session, `end` is
    not called when `fit` raises.

The global step: `get_global_step()` when one is registered, else the
optimizer's `iterations`, registered as the global step for the fit (and
unregistered at its end), so hooks' `require_global_step` finds it and
CheckpointSaverHook writes `model.ckpt-<iterations>`. Keras increments
`iterations` once per step. A registered global step that the training does
not increment (checked after the first run) is incremented by the callback:
counted in Python and assigned before any hook is called, at each epoch's end
and at the train's end, so idle runs cost no TensorFlow call. One the training
does increment is read after each run.

Hooks are scheduled as by a session (`ObservationSchedule`): hooks declaring
`steps_until_observed` cost nothing until due. With `steps_per_execution=N`
each train function call is N steps. A call in which a hook is due at a step
other than its last, or which records summaries, is run as N single-step calls
of a second train function (traced once), so the due hook sees exactly its
step; the other calls stay one N-step call. A hook that declares nothing needs
to see every step: with N > 1 it is refused at `on_train_begin`.

Summaries: when a SummarySaverHook is given, the train function is traced
under its writer with `tf.summary.record_if` on a boolean variable and the
step on an int64 variable, both set from Python on recording runs only: no
retrace, and non-recording runs skip the summary ops.
"""

import keras
import numpy as np
import tensorflow as tf

from tfmon import training_util
from tfmon.compiled import fetch_plan
from tfmon.hook_api import SessionRunArgs, SessionRunContext, SessionRunValues
from tfmon.hooks.summary import SummarySaverHook
from tfmon.session import hooked_session
from tfmon.session.monitored_session import check_hooks
from tfmon.session.observation_schedule import ObservationSchedule, declares_schedule
from tfmon.session.raw_session import RawSession

_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP

# How the global step advances under fit.
_KERAS_COUNTS = 'iterations'  # it is the optimizer's iterations: one per step
_WE_COUNT = 'callback'  # nothing in training increments it: the callback does
_TRAINING_COUNTS = 'training'  # the train step increments it: read after runs
_UNKNOWN = None  # a registered global step, before the first run tells


def _tf_variable(variable):
  """The tf.Variable behind a Keras 3 variable (or the variable itself)."""
  return variable if isinstance(variable, tf.Variable) else variable.value


class HookCallback(keras.callbacks.Callback):
  """Runs tfmon (and TF1) SessionRunHooks inside Keras `Model.fit`.

  ```python
  model.fit(dataset, epochs=3, callbacks=[tfmon.keras.HookCallback([
      tfmon.train.CheckpointSaverHook('/tmp/train', save_steps=100,
                                      saver={'model': model,
                                             'optimizer': model.optimizer}),
      tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=50),
      tfmon.train.StopAtStepHook(last_step=1000)])])
  ```

  Hooks see each call of the model's train function as a run (see the module
  docstring): `begin`/`after_create_session` at train begin, `end` at train
  end; names fetch the batch's logs, variables their pre-run values, callables
  run after the batch. The global step is the registered one, else the
  optimizer's `iterations`; `request_stop()` ends `fit` after the batch.

  Args:
    hooks: A list of `SessionRunHook`s (tfmon's, TF1's, or your own).

  Raises:
    TypeError: if `hooks` is not a list of SessionRunHooks.
  """

  def __init__(self, hooks):
    super().__init__()
    self._hooks = check_hooks(hooks, 'HookCallback hooks')
    self._active = False
    self._record = None  # bool variable: whether summaries record this call
    self._stamp = None  # int64 variable: the step summaries of this call carry

  # Keras' fit loop.

  def on_train_begin(self, logs=None):
    model = self.model
    if isinstance(model.train_function, _HookedTrainFunction):
      model.train_function = model.train_function.original  # a fit that raised
    self._steps_per_execution = int(getattr(model, 'steps_per_execution', 1) or 1)
    self._check_every_step_hooks()
    self._global_step, self._registered, self._counting = self._resolve_global_step()
    self._synced = None
    self._iterations = getattr(getattr(model, 'optimizer', None), 'iterations', None)
    self._writer = None
    if any(isinstance(h, SummarySaverHook) for h in self._hooks):
      # The train function must be traced under the writer: a fresh one, once.
      model.make_train_function(force=True)
    self._original = model.train_function
    self._single_step = None
    self._session = RawSession(runs_steps=False)
    self._coord = tf.train.Coordinator()
    try:
      for hook in self._hooks:
        hook.begin()
      value = int(self._global_step.numpy())
      self._synced = value
      for hook in self._hooks:
        hook.after_create_session(self._session, self._coord)
    except BaseException:
      self._unregister_global_step()
      raise
    self._schedule = ObservationSchedule(self._hooks, self._steps_per_execution,
                                         self._global_step)
    self._schedule.value = self._value = int(self._global_step.numpy())
    self._stop_before_first_run = self._coord.should_stop()
    model.stop_training = model.stop_training or self._stop_before_first_run
    model.train_function = _HookedTrainFunction(self, self._original)
    self._active = True

  def on_train_batch_begin(self, batch, logs=None):
    self._batch_begin = batch  # where this call starts in the epoch

  def on_epoch_end(self, epoch, logs=None):
    if self._active:
      self._sync_global_step()  # what Keras' own callbacks save is up to date

  def on_train_end(self, logs=None):
    if not self._active:
      return
    self._active = False
    model = self.model
    if model.train_function is not None and isinstance(
        model.train_function, _HookedTrainFunction):
      model.train_function = self._original
    try:
      self._sync_global_step()
      for hook in self._hooks:
        hook.end(self._session)
    finally:
      self._coord.request_stop()
      self._coord.join(stop_grace_period_secs=120)
      self._unregister_global_step()
      self._session.close()

  # Setup.

  def _check_every_step_hooks(self):
    if self._steps_per_execution == 1:
      return
    for hook in self._hooks:
      if not declares_schedule(hook):
        raise ValueError(
            f'{type(hook).__name__} ({hook!r}) needs to see every step: it declares '
            'neither steps_until_observed nor observes_fused_runs, and the model '
            f'was compiled with steps_per_execution={self._steps_per_execution}, '
            f'so fit runs {self._steps_per_execution} steps per call. Compile '
            'with steps_per_execution=1, or give the hook a '
            '`steps_until_observed(global_step)` method (tfmon\'s hooks have one).')

  def _resolve_global_step(self):
    """Returns `(variable, registered by us, counting mode)`."""
    registered = training_util.get_global_step()
    if registered is not None:
      optimizer = getattr(self.model, 'optimizer', None)
      iterations = getattr(optimizer, 'iterations', None)
      if iterations is not None and _tf_variable(iterations) is registered:
        return registered, False, _KERAS_COUNTS
      return registered, False, _UNKNOWN
    optimizer = getattr(self.model, 'optimizer', None)
    if optimizer is None or getattr(optimizer, 'iterations', None) is None:
      raise ValueError(
          'HookCallback needs a global step: none is registered and the model has '
          'no optimizer whose `iterations` could serve. Compile the model with an '
          'optimizer, or create one with tfmon.train.get_or_create_global_step().')
    variable = _tf_variable(optimizer.iterations)
    tf.compat.v1.add_to_collection(_GLOBAL_STEP, variable)
    return variable, True, _KERAS_COUNTS

  def _unregister_global_step(self):
    if self._registered:
      tf.compat.v1.get_default_graph().clear_collection(_GLOBAL_STEP)
      self._registered = False

  def _sync_global_step(self):
    """Assigns the counted global step to the variable, if the callback counts."""
    if self._counting == _WE_COUNT and self._synced != self._value:
      self._global_step.assign(self._value)
      self._synced = self._value

  # Runs.

  def run(self, iterator):
    """One call of the train function, as fit makes it: N steps and their hooks."""
    if self._stop_before_first_run:
      # StopAtStepHook found last_step reached at creation: run nothing.
      self._stop_before_first_run = False
      return {}
    n = self._steps_per_execution
    steps, hooks = self._schedule.plan(True)
    if steps == n:
      if not hooks and n == 1 and self._counting == _KERAS_COUNTS:
        # Idle: no hook to call, and Keras counts the step (the common case).
        logs = self._call(self._original, iterator)
        self._value = self._schedule.value + 1
        self._schedule.after_run(self._value, 1)
        return logs
      return self._run_hooked(hooks, n, iterator)
    # A hook is due at a step inside this call: single steps, so that each
    # hook sees exactly its step.
    # Steps left in the epoch, when Keras knows them: a single step called past
    # the end of the data fails in `get_next`, but the optimizer's iterations,
    # which does not depend on the batch, is still incremented.
    epoch_steps = (self.params or {}).get('steps')
    if epoch_steps:
      n = max(1, min(n, epoch_steps - getattr(self, '_batch_begin', 0)))
    logs = None
    for _ in range(n):
      steps, hooks = self._schedule.plan(False)
      try:
        logs = self._run_hooked(hooks, 1, iterator)
      except (tf.errors.OutOfRangeError, StopIteration):
        self._schedule.value = None  # read it anew (see above)
        if logs is None:
          raise
        break  # the data ran out: this call ran fewer steps; the next one ends
      if self.model.stop_training:
        break
    return logs

  def _run_hooked(self, hooks, steps, iterator):
    """Runs `steps` steps (one call's worth) with `hooks` observing."""
    schedule = self._schedule
    before = self._value = schedule.value
    if hooks:
      self._sync_global_step()
    run_context = SessionRunContext(
        original_args=SessionRunArgs(None), session=self._session)
    missed = schedule.missed or None
    requests = []
    self._pending_record = None
    for hook in hooks:
      run_context.steps_run = steps + (missed.get(hook, 0) if missed else 0)
      request = hooked_session.checked_run_args(hook, hook.before_run(run_context))
      if request is None:
        continue
      if request.feed_dict:
        raise ValueError(
            f'{type(hook).__name__}.before_run feeds {sorted(request.feed_dict)}; '
            'under Keras fit there is no step function to feed: the data comes '
            'from the dataset. Use the hook with a tfmon session instead.')
      if request.fetches is not None:
        requests.append((hook, _Request(self, hook, request.fetches, before)))
    if steps > 1 and self._counting != _KERAS_COUNTS and (
        self._iterations is not None):
      self._iterations_before = int(self._iterations.numpy())
    logs = self._execute(iterator, steps)
    after, steps = self._global_step_after(before, steps)
    self._value = after
    run_context.global_step_after = after
    if hooks:
      self._sync_global_step()
    callables = [leaf for _, r in requests for leaf in r.callables]
    if callables:
      results = iter(self._session.run(callables))
      for _, r in requests:
        r.callable_results = [next(results) for _ in r.callables]
    results = {hook: r.results(logs) for hook, r in requests}
    no_results = SessionRunValues(None, None, None)
    for hook in hooks:
      run_context.steps_run = steps + (missed.get(hook, 0) if missed else 0)
      hook.after_run(run_context, SessionRunValues(results[hook], None, None)
                     if hook in results else no_results)
    # After the hooks' after_run, as the session does: a hook's next due step
    # may depend on what its after_run counted.
    schedule.after_run(after, steps)
    if run_context.stop_requested or self._coord.should_stop():
      self.model.stop_training = True
    return logs

  def _global_step_after(self, before, steps):
    """`(global step after, steps run)` for a call planned as `steps` steps: a
    call of several steps runs fewer when the data runs out (the epoch's last)."""
    if steps > 1 and self._iterations is not None:
      if self._counting == _KERAS_COUNTS:
        after = int(self._global_step.numpy())
        return after, after - before
      steps = int(self._iterations.numpy()) - self._iterations_before
    if self._counting == _KERAS_COUNTS:
      return before + steps, steps
    if self._counting == _UNKNOWN:  # the first run tells who increments it
      value = int(self._global_step.numpy())
      self._counting = _TRAINING_COUNTS if value != before else _WE_COUNT
    if self._counting == _TRAINING_COUNTS:
      return int(self._global_step.numpy()), steps
    return before + steps, steps

  def _execute(self, iterator, steps):
    """Runs one call's steps; only the last records summaries, if asked to."""
    if self._pending_record is None:
      if steps == 1 and self._steps_per_execution > 1:
        return self._call(self._single_step_function(), iterator)
      return self._call(self._original, iterator)
    if steps > 1:
      # Summaries record in the last step only: the steps before run alone.
      for _ in range(steps - 1):
        self._call(self._single_step_function(), iterator)
    writer, stamp = self._pending_record
    self._stamp.assign(stamp + steps - 1)
    self._record.assign(True)
    try:
      function = (self._single_step_function() if self._steps_per_execution > 1
                  else self._original)
      return self._call(function, iterator)
    finally:
      self._record.assign(False)
      writer.flush()

  def _call(self, function, iterator):
    if self._writer is None:
      return function(iterator)
    with self._writer.as_default(step=self._stamp), tf.summary.record_if(
        self._record_predicate):
      return function(iterator)

  def _record_predicate(self):
    return self._record.read_value()  # read inside the traced train function

  def _single_step_function(self):
    """A train function running one step per call (for steps_per_execution > 1)."""
    model = self.model
    if self._single_step is None:
      n = model.steps_per_execution
      model.steps_per_execution = 1
      try:
        model.make_train_function(force=True)
        function = model.train_function
      finally:
        model.steps_per_execution = n
        model.train_function = _HookedTrainFunction(self, self._original)

      def single_step(iterator):
        # Keras reads steps_per_execution when it traces the function.
        model.steps_per_execution = 1
        try:
          return function(iterator)
        finally:
          model.steps_per_execution = n

      self._single_step = single_step
    return self._single_step

  def start_recording(self, writer, stamp):
    """Makes this run's last step record summaries into `writer`, stamped `stamp`
    (the step after the run's first: its post-step global step)."""
    if self._record is None:
      self._record = tf.Variable(False, trainable=False, name='tfmon_record')
      self._stamp = tf.Variable(0, dtype=tf.int64, trainable=False,
                                name='tfmon_summary_step')
    if self._writer is None:
      self._writer = writer
    elif writer is not self._writer:
      raise ValueError(
          'Two SummarySaverHooks with different writers under one HookCallback: '
          'the train function records into one. Give them one output_dir.')
    self._pending_record = (writer, stamp)


class _HookedTrainFunction:
  """What `model.train_function` is during a fit with a HookCallback."""

  def __init__(self, callback, original):
    self.callback = callback
    self.original = original

  def __call__(self, iterator):
    if not self.callback._active:  # pylint: disable=protected-access
      return self.original(iterator)  # a later fit without the callback
    return self.callback.run(iterator)


class _Request:
  """One hook's fetches for one run, resolved as the module docstring says."""

  def __init__(self, callback, hook, fetches, global_step_before):
    self._hook = hook
    self._leaves = tf.nest.flatten(fetches)
    self._fetches = fetches
    self._values = [None] * len(self._leaves)
    self._names = []  # (index, name)
    self._global_step_index = []
    self._before = global_step_before
    self._callback = callback
    self.callables = []
    self._callable_index = []
    global_step = callback._global_step  # pylint: disable=protected-access
    for i, leaf in enumerate(self._leaves):
      kind = fetch_plan.leaf_kind(leaf)
      if kind == fetch_plan.NAME:
        self._names.append((i, leaf))
      elif kind == fetch_plan.STOP_IF:
        self._names.append((i, leaf.name))
      elif kind == fetch_plan.VARIABLE:
        if leaf is global_step or _tf_variable(leaf) is global_step:
          self._global_step_index.append(i)  # as of the last step: results()
        else:
          self._values[i] = np.asarray(leaf.numpy())
      elif kind == fetch_plan.VALUE:
        self._values[i] = np.asarray(leaf)
      elif kind in (fetch_plan.STEP, fetch_plan.OP):
        self._callable_index.append(i)
        self.callables.append(leaf)
      elif kind == fetch_plan.SUMMARIES:
        if leaf.record:
          callback.start_recording(leaf.writer, global_step_before + 1)
        elif callback._writer is None:  # pylint: disable=protected-access
          callback.start_recording(leaf.writer, None)
          callback._pending_record = None  # pylint: disable=protected-access
      elif kind == fetch_plan.INVALID:
        raise TypeError(
            f'{type(hook).__name__} fetches {leaf!r} of type {type(leaf).__name__}, '
            'which HookCallback cannot fetch: give a name of the logs (\'loss\'), a '
            'variable, a callable or a value.')
    self.callable_results = []

  def results(self, logs):
    if self._global_step_index:
      # Before the run's last step, as a fused session gives it: the run's
      # start for one step, else one less than the count after the run.
      callback = self._callback
      value = self._before
      if callback._value - self._before > 1 and callback._counting in (  # pylint: disable=protected-access
          _KERAS_COUNTS, _WE_COUNT):  # pylint: disable=protected-access
        value = callback._value - 1  # pylint: disable=protected-access
      for i in self._global_step_index:
        self._values[i] = np.int64(value)
    for (i, name) in self._names:
      if name not in logs:
        raise ValueError(
            f'{type(self._hook).__name__} fetches {name!r}, which is not in the logs '
            f'of this batch; they hold {sorted(logs)}. Under Keras fit a name is a '
            'key of the logs fit gives callbacks: the compiled loss and metrics.')
      value = logs[name]
      self._values[i] = value.numpy() if hasattr(value, 'numpy') else np.asarray(value)
    for i, value in zip(self._callable_index, self.callable_results):
      self._values[i] = value
    return tf.nest.pack_sequence_as(self._fetches, self._values)
