"""MonitoredSession and SingularMonitoredSession: the session stack users hold.

The stack, from the top: RecoverableSession (MonitoredSession only) over
CoordinatedSession over HookedSession over RawSession, as in v1's
monitored_session.py. Each layer adds one concern; recovery re-creates the whole
stack below it through `_CoordinatedSessionCreator` and never sees the hooks.
"""

import contextlib
import inspect
import os
import signal

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import arg_checks
from tfmon import paths
from tfmon import training_util

from tfmon.hook_api import SessionRunHook
from tfmon.hooks import tf_builtins
from tfmon.compiled import graph_capture
from tfmon.session import graceful_stop
from tfmon.session import graph_mode
from tfmon import workers
from tfmon.session.coordinated_session import CoordinatedSession
from tfmon.session.hooked_session import HookedSession
from tfmon.session.raw_session import RawSession
from tfmon.session.recoverable_session import RecoverableSession
from tfmon.session.session_creator import ChiefSessionCreator, SessionCreator
from tfmon.session.session_creator import refuse_tensorflows_own
from tfmon.session.step_context import StepContext


def check_hooks(hooks, arg_name='hooks'):
  """Returns `hooks` as a list, with TF's built-in hooks replaced by tfmon's.

  Raises:
    TypeError: naming the item that is not a hook, or a TF built-in hook that
      tfmon cannot run as its own (the message names the replacement).
  """
  hooks = arg_checks.check_list_of(hooks, SessionRunHook, arg_name, 'hook')
  if graph_capture.current() is not None:
    return hooks  # on a captured TF1 graph, TF's own hooks run as they are
  return [tf_builtins.as_tfmon_hook(hook, f'{arg_name}[{i}]')
          for i, hook in enumerate(hooks)]


def _check_step_fn(step_fn):
  try:
    parameters = tuple(inspect.signature(step_fn).parameters)
  except (TypeError, ValueError):
    parameters = ()
  if inspect.ismethod(step_fn):
    parameters = ('self',) + parameters
  if parameters not in (('step_context',), ('self', 'step_context')):
    raise ValueError(
        '`step_fn` may either have one `step_context` argument, or'
        ' `self` and `step_context` arguments if it\'s an instance'
        ' method. Got {} instead.'.format(parameters))


@contextlib.contextmanager
def _both(first, second):
  with first, second:
    yield


def _resolve_strategy(strategy):
  """The strategy a session works under (given, else the one in scope), or None
  for TF's default one, which needs no scope."""
  in_scope = tf.distribute.get_strategy()  # TF's default one outside any scope
  strategy = in_scope if strategy is None else strategy
  if not isinstance(strategy, (tf.distribute.Strategy, tf.compat.v1.distribute.Strategy)):
    raise TypeError(f'strategy={strategy!r} is not a tf.distribute.Strategy: pass '
                    'one such as tf.distribute.MirroredStrategy(), or None for the '
                    'one in scope.')
  if isinstance(strategy, (tf.distribute.experimental.ParameterServerStrategy,
                           tf.compat.v1.distribute.experimental.ParameterServerStrategy)):
    raise ValueError(
        f'strategy={strategy!r}: ParameterServerStrategy runs steps through a '
        'tf.distribute.coordinator.ClusterCoordinator, which schedules them on '
        'remote workers, and a tfmon session runs each step in its own process. '
        'Use MultiWorkerMirroredStrategy (configured by TF_CONFIG, one session '
        'per worker) to train on several machines, or MirroredStrategy on one.')
  if isinstance(strategy, (tf.distribute.TPUStrategy,
                           tf.distribute.experimental.TPUStrategy,
                           tf.compat.v1.distribute.experimental.TPUStrategy)):
    raise ValueError(
        f'strategy={strategy!r}: TPUStrategy is not supported: a tfmon step runs '
        'summaries and hook fetches the TPU cannot compile, and tfmon has not '
        'been tested on TPUs. Use MirroredStrategy or '
        'MultiWorkerMirroredStrategy on CPUs or GPUs.')
  if tf.distribute.has_strategy():
    if strategy is not in_scope:
      raise ValueError(
          f'strategy={strategy!r} differs from {in_scope!r}, whose scope this '
          'session is created in. Pass the strategy your model and optimizer were '
          "created under, or create the session outside the other strategy's scope.")
  elif strategy is in_scope:
    return None  # TF's default strategy
  return strategy


class _CoordinatedSessionCreator(SessionCreator):
  """Creates the stack below recovery: coordinator, hooks, raw session."""

  def __init__(self, session_creator, hooks, stop_grace_period_secs,
               steps_per_loop=1, jit_compile=None, profile_dir=''):
    self._session_creator = session_creator
    self._hooks = hooks
    self._stop_grace_period_secs = stop_grace_period_secs
    self._steps_per_loop = steps_per_loop
    self._jit_compile = jit_compile
    self._profile_dir = profile_dir
    self.coord = None
    self.tf_sess = None

  def create_session(self):
    session = self._session_creator.create_session()
    if not isinstance(session, RawSession):
      raise TypeError(
          f'{type(self._session_creator).__name__}.create_session() returned '
          f'{session!r}; a tfmon session creator returns a tfmon RawSession. Use '
          'tfmon.train.ChiefSessionCreator or WorkerSessionCreator.')
    if self._jit_compile:
      session.set_jit_compile(self._jit_compile)
    self.tf_sess = session
    if session.graph is not None:
      session.seed_graph_fetches(graph_mode.tensors_held_by(self._hooks))
    # Like v1, no exception type is a "clean" stop: all of them propagate.
    self.coord = tf.train.Coordinator(clean_stop_exception_types=[])
    graph = session.graph
    if graph is not None and graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS):
      # As TF1: threads running the enqueue ops until the coordinator stops
      # them (the session's close joins them); a closed queue ends the input
      # with OutOfRangeError.
      with graph.graph_mode():
        tf.compat.v1.train.start_queue_runners(sess=session, coord=self.coord)
    for hook in self._hooks:
      hook.after_create_session(self.tf_sess, self.coord)
    return CoordinatedSession(
        HookedSession(self.tf_sess, self._hooks, self._steps_per_loop,
                      self._profile_dir), self.coord,
        self._stop_grace_period_secs)


class _MonitoredSession:
  """See `MonitoredSession` or `SingularMonitoredSession`."""

  StepContext = StepContext

  def __init__(self, session_creator, hooks, should_recover,
               stop_grace_period_secs=120, steps_per_loop=1, jit_compile=None,
               strategy=None, profile_dir='',
               graceful_stop_signals=graceful_stop.DEFAULT_SIGNALS):
    self._sess = None
    self._graceful_stop = None
    self._input_ended = False  # a multi-worker session's input ran out
    signals = graceful_stop.check_signals(graceful_stop_signals)
    arg_checks.check_seconds(stop_grace_period_secs, 'stop_grace_period_secs',
                             allow_none=False, allow_zero=True)
    profile_dir = paths.check_directory(profile_dir, 'profile_dir')
    # Made inside `with tfmon.Graph().as_default():`, it runs that graph.
    self._graph = graph_capture.current()
    self._hooks = check_hooks(hooks)
    if self._graph is not None:  # TF1 hooks run in graph mode
      self._hooks = graph_mode.hooks_for(self._hooks, self._graph)
    strategy = _resolve_strategy(strategy)
    if self._graph is not None:  # the one it was built under (capture_graph)
      strategy = graph_mode.strategy_of(self._graph, strategy)
    if (jit_compile and self._graph is None and strategy and
        strategy.num_replicas_in_sync > 1):
      raise ValueError(
          f'jit_compile={jit_compile!r} with {strategy!r}: XLA compiles each whole '
          f'step function, which spans its {strategy.num_replicas_in_sync} replicas\' '
          'devices, and XLA cannot compile across devices. Leave jit_compile unset '
          'under a strategy with more than one replica.')
    self._strategy = strategy
    self._multi_worker = strategy is not None and workers.count(strategy) > 1
    if self._multi_worker and should_recover:
      # Re-creating the session cannot bring a lost worker back, and the
      # others would wait for it: the error ends this worker (see run()).
      should_recover = False
    if (isinstance(steps_per_loop, bool) or not isinstance(steps_per_loop, int) or
        steps_per_loop < 1):
      raise ValueError(f'steps_per_loop={steps_per_loop!r} must be a positive int: '
                       'the most training steps one run may fuse.')
    refuse_tensorflows_own(
        'session_creator', session_creator,
        [tf.compat.v1.train.ChiefSessionCreator, tf.compat.v1.train.WorkerSessionCreator],
        'ChiefSessionCreator or WorkerSessionCreator', why=', which makes a TF1 Session')
    if session_creator is not None and not isinstance(session_creator, SessionCreator):
      raise TypeError(
          f'session_creator must be a SessionCreator (e.g. '
          f'tfmon.train.ChiefSessionCreator()); got {session_creator!r}.')
    # Installed before the hooks' begin: a signal during creation (a long
    # restore) stops the session before its first step.
    self._graceful_stop = graceful_stop.GracefulStop(
        signals, self, _request_stop_at_step_boundary)
    # A fused run ends early on a signal, except across workers: they agree to
    # stop at the start of their next call instead (WorkerAgreement).
    self._graceful_stop.install(
        watch_during_runs=steps_per_loop > 1 and not self._multi_worker)
    try:
      self._create(session_creator, should_recover, stop_grace_period_secs,
                   steps_per_loop, jit_compile, profile_dir)
    except BaseException:
      self._graceful_stop.restore()
      raise

  def _create(self, session_creator, should_recover, stop_grace_period_secs,
              steps_per_loop, jit_compile, profile_dir):
    training_util.share_global_step_with_this_thread()
    with self._scope():
      for hook in self._hooks:
        hook.begin()
      self._coordinated_creator = _CoordinatedSessionCreator(
          session_creator=session_creator or ChiefSessionCreator(),
          hooks=self._hooks,
          stop_grace_period_secs=stop_grace_period_secs,
          steps_per_loop=steps_per_loop,
          jit_compile=jit_compile,
          profile_dir=os.fspath(profile_dir or ''))
      if should_recover:
        self._sess = RecoverableSession(self._coordinated_creator)
      else:
        self._sess = self._coordinated_creator.create_session()

  def _scope(self):
    """The session's strategy's scope (nothing to enter for TF's default one),
    or for a captured graph, running eagerly below its hooks."""
    if self._graph is not None:  # built under its strategy, if any
      if self._multi_worker:  # whose scope names the workers to agree with
        return _both(graph_capture.running(self._graph), self._strategy.scope())
      return graph_capture.running(self._graph)
    return self._strategy.scope() if self._strategy else contextlib.nullcontext()

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """Runs fetches and every hook's requests in one compiled call.

    Args:
      fetches: A nest (list, tuple, dict, namedtuple) of step functions
        (callables), `tfmon.train.op(fn)`, variables, names, tensors, numpy values
        or None.
      feed_dict: A dict from step-function parameter names to values.
      options: A `tf.compat.v1.RunOptions`, accepted for compatibility.
      run_metadata: A `tf.compat.v1.RunMetadata`, accepted for compatibility.

    Returns:
      Numpy results in the structure of `fetches`.

    Raises:
      RuntimeError: if called after `should_stop()` or after `close()`.
      TypeError, ValueError: for fetches or feeds it cannot run (the message says
        which and how to fix it).
    """
    if self._sess is None:
      raise RuntimeError('Run called on a closed session: create a new one.')
    if self._graceful_stop.signal is not None:
      self._stop_on_signal()  # raises SystemExit
    if feed_dict is not None or options is not None or run_metadata is not None:
      _check_run_args(feed_dict, options, run_metadata)
    if self._strategy is None and self._graph is None:  # no nullcontext per run: 0.4 µs
      return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                            run_metadata=run_metadata)
    if self._multi_worker:
      return self._run_multi_worker(fetches, feed_dict, options, run_metadata)
    with self._scope():
      return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                            run_metadata=run_metadata)

  def _run_multi_worker(self, fetches, feed_dict, options, run_metadata):
    with self._scope(), self._naming_lost_workers():
      results = self._sess.run(fetches, feed_dict=feed_dict, options=options,
                               run_metadata=run_metadata)
    agreed = self._tf_sess().agreement.agreed_stop
    if agreed > 1 and self._graceful_stop.signal is None:
      # Another worker received a stop signal: every worker stops, saves at
      # this step and exits with its code, so a supervisor restarts them all.
      self._graceful_stop.signal = signal.Signals(agreed)
      logging.warning(
          'Another worker received %s: every worker stops after this step, '
          'saves a checkpoint at it and exits with code %d.',
          self._graceful_stop.signal.name, graceful_stop.exit_code(agreed))
    return results

  @contextlib.contextmanager
  def _naming_lost_workers(self):
    """Turns a collective op's failure into an error naming the worker lost."""
    try:
      yield
    except (tf.errors.UnavailableError, tf.errors.AbortedError,
            tf.errors.CancelledError, tf.errors.DeadlineExceededError) as e:
      raise workers.lost(e, self._strategy) from e

  def _agree_to_stop(self):
    """Tells the other workers this one stops, once (multi-worker only)."""
    raw = self._multi_worker and not self._input_ended and self._tf_sess()
    if not raw:
      return
    signum = self._graceful_stop.signal
    with self._scope(), self._naming_lost_workers():
      raw.agree_to_stop(1 if signum is None else int(signum))

  def run_step_fn(self, step_fn):
    """Runs `step_fn(step_context)` with access to the raw session.

    Args:
      step_fn: A function with one `step_context` argument (or `self` and
        `step_context`), receiving a `StepContext`.

    Returns:
      What `step_fn` returns.

    Raises:
      StopIteration: if `step_fn` called `step_context.request_stop()`; a `with`
        block around the session absorbs it.
      ValueError: if `step_fn` does not take exactly `step_context`.
    """
    _check_step_fn(step_fn)
    if self._sess is None:
      raise RuntimeError('run_step_fn called on a closed session: create a new one.')
    if self._graceful_stop.signal is not None:
      self._stop_on_signal()  # raises SystemExit
    with self._scope():
      return self._sess.run_step_fn(step_fn, self._tf_sess, None)

  @property
  def graph(self):
    """The captured TF1 graph this session runs (`FileWriter(logdir,
    sess.graph)`), or None: a session of step functions runs no one graph, and
    none while closed, as TF1's."""
    raw = self._tf_sess()
    return raw.graph if raw is not None else None

  def should_stop(self):
    stop = (self._sess is None or self._graceful_stop.signal is not None or
            self._sess.should_stop())
    if stop and self._multi_worker:
      self._agree_to_stop()
    return stop

  def request_graceful_stop(self, signum=signal.SIGTERM):
    """Stops as on a stop signal: after the step in flight, then exits.

    What a session's own handler does (see `graceful_stop_signals`); for a
    session created outside the main thread, call it from a handler installed
    in the main thread. Thread-safe: a fused run in progress ends after its
    current step.

    Args:
      signum: The signal to act as (the exit code is 128 + signum).
    """
    self._graceful_stop.request(signum)
    _request_stop_at_step_boundary(self)

  def close(self):
    """Runs the hooks' `end` and closes the session.

    Raises:
      SystemExit: with code 128 + signum after a stop signal (graceful stop),
        once the session is closed.
    """
    self._close_internal()
    self._exit_if_signalled()

  def __enter__(self):
    return self

  def __exit__(self, exception_type, exception_value, traceback):
    if exception_type is SystemExit and self._sess is None:
      return False  # run() stopped on a signal and closed the session already
    if exception_type is tf.errors.OutOfRangeError and self._multi_worker:
      # The others are at this step's end too, or wait in its collective ops,
      # which this worker cannot join: it leaves without the agreement's call.
      self._input_ended = True
      logging.info('This worker\'s input ended (OutOfRangeError): it stops without '
                   'waiting for the other workers, whose inputs must end at the same '
                   'step (give every worker as many batches).')
    if exception_type in (tf.errors.OutOfRangeError, StopIteration):
      exception_type = None
    self._close_internal(exception_type)
    if exception_type is None:
      self._exit_if_signalled()
    return exception_type is None  # True suppresses the exception

  def _stop_on_signal(self):
    """Closes the session after a stop signal, then raises SystemExit."""
    self._close_internal()
    self._exit_if_signalled()

  def _exit_if_signalled(self):
    signum = self._graceful_stop.signal
    if signum is None:
      return
    global_step = training_util.get_global_step()
    with self._scope():  # a captured graph's code runs in graph mode
      step = 'unknown' if global_step is None else int(global_step.numpy())
    saved = [hook.last_checkpoint for hook in self._hooks
             if getattr(hook, 'last_checkpoint', None)]
    code = graceful_stop.exit_code(signum)
    logging.warning(
        'Stopped on %s at global step %s: the hooks\' end ran%s. Exiting with code '
        '%d (128 + %s), so that a supervisor restarts the job; the next start '
        'resumes from the latest checkpoint.', signum.name, step,
        f'; the latest checkpoint is {saved[-1]}' if saved else
        ' (no CheckpointSaverHook: nothing was saved)', code, signum.name)
    raise SystemExit(code)

  def _close_internal(self, exception_type=None):
    try:
      with self._scope():
        self._close_in_scope(exception_type)
    finally:
      self._graceful_stop.restore()

  def _close_in_scope(self, exception_type):
    try:
      if not exception_type:
        self._agree_to_stop()
        for hook in self._hooks:
          hook.end(self._coordinated_creator.tf_sess)
    finally:
      try:
        if self._sess is None:
          raise RuntimeError('Session is already closed.')
        self._sess.close()
      finally:
        self._sess = None
        self._coordinated_creator.tf_sess = None
        self._coordinated_creator.coord = None

  def _tf_sess(self):
    return self._coordinated_creator.tf_sess


def _check_run_args(feed_dict, options, run_metadata):
  if feed_dict is not None and not isinstance(feed_dict, dict):
    raise TypeError(f'feed_dict={feed_dict!r} of type {type(feed_dict).__name__} is '
                    "not a dict: pass {'parameter_name': value, ...}.")
  if options is not None and not isinstance(options, tf.compat.v1.RunOptions):
    raise TypeError(f'options={options!r} of type {type(options).__name__} is not a '
                    'tf.compat.v1.RunOptions: pass one, or None.')
  if run_metadata is not None and not isinstance(run_metadata,
                                                 tf.compat.v1.RunMetadata):
    raise TypeError(f'run_metadata={run_metadata!r} of type '
                    f'{type(run_metadata).__name__} is not a '
                    'tf.compat.v1.RunMetadata: pass one, or None.')


def _request_stop_at_step_boundary(session):
  """Asks `session`'s current raw session to end a fused run in progress."""
  creator = getattr(session, '_coordinated_creator', None)  # None while creating
  raw = creator and creator.tf_sess
  if raw is not None:
    raw.request_stop_at_step_boundary()


class MonitoredSession(_MonitoredSession):
  """Session-like object that handles initialization, recovery and hooks.

  Example:

  ```python
  global_step = tfmon.train.get_or_create_global_step()

  def train_step():
    ...
    global_step.assign_add(1)
    return {'loss': loss}

  hooks = [tfmon.train.StopAtStepHook(last_step=1000)]
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_step))
  ```

  Construction calls every hook's `begin()`, creates the session (the creator
  initializes or restores), then calls `after_create_session(session, coord)`.
  `run` calls `before_run` of all hooks, runs the caller's fetches and the hooks'
  in one compiled call, then calls `after_run`. AbortedError and UnavailableError
  raised in a run close and re-create the session, and the run is retried
  (except under a multi-worker strategy: there they mean a worker was lost, and
  the error, naming it, ends this worker too).

  Under MultiWorkerMirroredStrategy every worker process runs its own session:
  a stop on any worker (a hook, the coordinator, a stop signal) stops every
  worker after the same step, agreed inside the compiled call; see docs/distribution.md,
  "Multi-worker training".

  Step fusion: with `steps_per_loop=K`, one `run` of a step function (with no
  feeds) runs up to K steps in one compiled loop while every hook allows it:
  hooks declare when they next need to see a run (all built-in hooks do), and a
  hook that declares nothing sees every step, so legacy hooks keep v1 semantics.

  Args:
    session_creator: A `ChiefSessionCreator` (the default) or `WorkerSessionCreator`.
    hooks: A list of `SessionRunHook`s.
    stop_grace_period_secs: Seconds given to coordinator threads to stop on close.
    steps_per_loop: At most this many steps per run (TF2 only).
    jit_compile: Compile the step functions with XLA (TF2 only): summaries
      written inside a step cannot be compiled; use `summary_op` callables.
    strategy: A `tf.distribute.Strategy` (TF2 only; default: the one in scope
      at construction). Hooks, session creation, runs and `close` run in its
      scope, so variables created there are distributed by it; step functions
      call `strategy.run` for per-replica work and return reduced values.
    profile_dir: The TensorBoard log directory under which a run traced with
      `RunOptions` (a `trace_level`, from the caller or a hook) writes its TF2
      profile, `plugins/profile/<time>_step_<step>/` (TF2 has no step_stats to
      put in `RunMetadata`). Default: the current directory, as ProfilerHook's.
    graceful_stop_signals: The signals that stop the session gracefully (TF2
      only; default SIGTERM and SIGINT): the step in flight finishes, no other
      starts, the hooks' `end` runs (CheckpointSaverHook saves that step), and
      closing raises `SystemExit(128 + signal)`. None (or ()) opts out and
      leaves the program's own handlers in place. Handlers are installed in
      the main thread only, and restored on close.

  Raises:
    TypeError: a hook that is not a SessionRunHook, a creator of the wrong type,
      a `strategy` that is not a tf.distribute.Strategy, or
      `graceful_stop_signals` that are not signals.
    ValueError: a `steps_per_loop` that is not a positive int, a
      ParameterServerStrategy, a strategy other than the one in scope, or
      SIGKILL/SIGSTOP in `graceful_stop_signals`.
  """

  def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120,
               steps_per_loop=1, jit_compile=None, strategy=None, profile_dir='',
               graceful_stop_signals=graceful_stop.DEFAULT_SIGNALS):
    super().__init__(session_creator, hooks, should_recover=True,
                     stop_grace_period_secs=stop_grace_period_secs,
                     steps_per_loop=steps_per_loop, jit_compile=jit_compile,
                     strategy=strategy, profile_dir=profile_dir,
                     graceful_stop_signals=graceful_stop_signals)


class SingularMonitoredSession(_MonitoredSession):
  """A MonitoredSession that does not recover, and gives access to its raw session.

  Args:
    hooks: A list of `SessionRunHook`s.
    scaffold: A `Scaffold`, or None for the default.
    master: Ignored, with a warning: tfmon runs in this process.
    config: A `tf.compat.v1.ConfigProto`, not applied: a warning names what it
      sets beyond TF2's defaults (use `tf.config`).
    checkpoint_dir: Restore the latest checkpoint in this directory, if any.
    stop_grace_period_secs: Seconds given to coordinator threads to stop on close.
    checkpoint_filename_with_path: Restore this checkpoint (instead of the
      latest in `checkpoint_dir`).
    graceful_stop_signals: The signals that stop the session gracefully (TF2
      only; default SIGTERM and SIGINT): the step in flight finishes, no other
      starts, the hooks' `end` runs (CheckpointSaverHook saves that step), and
      closing raises `SystemExit(128 + signal)`. None (or ()) opts out and
      leaves the program's own handlers in place. Handlers are installed in
      the main thread only, and restored on close.
  """

  def __init__(self, hooks=None, scaffold=None, master='', config=None,
               checkpoint_dir=None, stop_grace_period_secs=120,
               checkpoint_filename_with_path=None,
               graceful_stop_signals=graceful_stop.DEFAULT_SIGNALS):
    session_creator = ChiefSessionCreator(
        scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir,
        checkpoint_filename_with_path=checkpoint_filename_with_path)
    super().__init__(session_creator, hooks, should_recover=False,
                     stop_grace_period_secs=stop_grace_period_secs,
                     graceful_stop_signals=graceful_stop_signals)

  def raw_session(self):
    """Returns the RawSession, which runs fetches without hooks."""
    return self._tf_sess()
