"""MonitoredTrainingSession: a MonitoredSession with v1's default training hooks."""


from tfmon import arg_checks
from tfmon import paths
from tfmon import workers
from tfmon.compiled import graph_capture
from tfmon.session import graceful_stop
from tfmon.hooks.checkpoint import CheckpointSaverHook
from tfmon.hooks.summary import StepCounterHook, SummarySaverHook
from tfmon.session.monitored_session import MonitoredSession, check_hooks
from tfmon.session.scaffold import Scaffold
from tfmon.session.session_creator import ChiefSessionCreator, WorkerSessionCreator

# Sentinel: v1 tells "not given" apart from None (None turns a duty off).
USE_DEFAULT = object()


def _default_timers(steps, secs, default_steps, default_secs):
  """v1's rule: neither given gives the defaults; one given turns the other off."""
  if steps is USE_DEFAULT and secs is USE_DEFAULT:
    return default_steps, default_secs
  return (None if steps is USE_DEFAULT else steps,
          None if secs is USE_DEFAULT else secs)


def _is_chief(is_chief, strategy):
  """`is_chief`, or when None the multi-worker strategy's answer (else True).

  Raises:
    TypeError: if it is not a bool or None.
    ValueError: if it contradicts the strategy's cluster resolver.
  """
  if is_chief is not None:
    arg_checks.check_bool(is_chief, 'is_chief')
  strategy = workers.current(strategy)
  if strategy is None:
    return True if is_chief is None else is_chief
  chief = workers.is_chief(strategy)
  if is_chief is not None and is_chief != chief:
    raise ValueError(
        f'is_chief={is_chief!r}, but the strategy\'s cluster resolver says this '
        f'process is {workers.name(strategy)}, which is {"" if chief else "not "}'
        'the chief (TF_CONFIG\'s \'chief\' task, else worker 0). Leave is_chief '
        'unset under a multi-worker strategy, or fix TF_CONFIG.')
  return chief


def MonitoredTrainingSession(  # pylint: disable=invalid-name
    master='',
    is_chief=None,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps=100,
    max_wait_secs=7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    save_graph_def=True,
    checkpoint=None,
    max_to_keep=5,
    keep_checkpoint_every_n_hours=None,
    steps_per_loop=1,
    jit_compile=None,
    strategy=None,
    graceful_stop_signals=graceful_stop.DEFAULT_SIGNALS):
  """Creates a `MonitoredSession` for training, with v1's arguments and hooks.

  The chief restores the latest checkpoint in `checkpoint_dir` (else runs the
  scaffold's init) and gets the default hooks, in v1's order: `chief_only_hooks`,
  StepCounterHook, SummarySaverHook, CheckpointSaverHook, then `hooks`. A worker
  (`is_chief=False`) restores from `checkpoint_dir` too and gets only `hooks`.

  Under MultiWorkerMirroredStrategy (configured by TF_CONFIG), every worker
  process creates this session with the same arguments. Each worker also gets
  a CheckpointSaverHook on the chief's timer, since every worker takes part in
  a save: the chief's lands in `checkpoint_dir`, the others' in a temporary
  directory that is removed. Stops, signals and timed saves are agreed by all
  workers (see docs/distribution.md, "Multi-worker training").

  Args:
    master: Ignored, with a warning: tfmon runs in this process (under a
      multi-worker strategy, silently: the strategy holds the cluster).
    is_chief: Whether this process initializes, checkpoints and writes
      summaries. Default: under a multi-worker strategy, what its cluster
      resolver says (the 'chief' task, else worker 0); otherwise True.
    checkpoint_dir: Where checkpoints are restored from and saved to.
    scaffold: A `Scaffold`.
    hooks: `SessionRunHook`s for every process.
    chief_only_hooks: `SessionRunHook`s for the chief only.
    save_checkpoint_secs: Checkpoint every N seconds (default 600 unless
      `save_checkpoint_steps` is given; None or 0 turns it off).
    save_summaries_steps: Summaries every N steps (default 100 unless
      `save_summaries_secs` is given).
    save_summaries_secs: Summaries every N seconds.
    config: A `tf.compat.v1.ConfigProto`, not applied: a warning names what it
      sets beyond TF2's defaults (use `tf.config`).
    stop_grace_period_secs: Seconds given to coordinator threads to stop on close.
    log_step_count_steps: StepCounterHook frequency (None or 0 turns it off).
    max_wait_secs: Accepted for v1 compatibility.
    save_checkpoint_steps: Checkpoint every N steps.
    summary_dir: Where summaries go (default: `checkpoint_dir`), and profiles of
      runs traced with `RunOptions` (see MonitoredSession's `profile_dir`).
    save_graph_def: Accepted for v1 compatibility.
    checkpoint: What checkpoints hold (TF2 only): a `tf.train.Checkpoint`, a
      `tf.train.CheckpointManager` or a dict of trackables such as
      `{'model': model, 'optimizer': optimizer}`. The global step is always in.
    max_to_keep: Checkpoints kept (TF2 only).
    keep_checkpoint_every_n_hours: Also keep one checkpoint every N hours (TF2 only).
    steps_per_loop: Fuse up to this many steps into one run when the hooks allow
      (TF2 only; see MonitoredSession).
    jit_compile: Compile the step functions with XLA (TF2 only).
    strategy: The `tf.distribute.Strategy` the session works under (TF2 only;
      default: the one in scope); see MonitoredSession.
    graceful_stop_signals: Signals that stop training gracefully (TF2 only;
      default SIGTERM and SIGINT): the step in flight finishes, a checkpoint is
      saved at it, the hooks' `end` runs, and closing raises
      `SystemExit(128 + signal)`. None opts out. See MonitoredSession.

  Returns:
    A `MonitoredSession`.

  Raises:
    RuntimeError: with default hooks but no global step.
    TypeError, ValueError: for bad hooks, scaffold, checkpoint or strategy
      arguments.
  """
  save_summaries_steps, save_summaries_secs = _default_timers(
      save_summaries_steps, save_summaries_secs, 100, None)
  save_checkpoint_steps, save_checkpoint_secs = _default_timers(
      save_checkpoint_steps, save_checkpoint_secs, None, 600)
  checkpoint_dir = paths.check_directory(checkpoint_dir, 'checkpoint_dir')
  summary_dir = paths.check_directory(summary_dir, 'summary_dir')
  graceful_stop.check_signals(graceful_stop_signals)
  if strategy is None:  # a captured graph's is the one it was built under
    strategy = getattr(graph_capture.current(), 'strategy', None)
  is_chief = _is_chief(is_chief, strategy)
  if workers.current(strategy) is not None:
    master = ''  # the strategy holds the cluster: nothing to warn of
  for name, value in (('save_checkpoint_steps', save_checkpoint_steps),
                      ('save_summaries_steps', save_summaries_steps),
                      ('log_step_count_steps', log_step_count_steps)):
    arg_checks.check_count(value, name, allow_zero=True)
  for name, value in (('save_checkpoint_secs', save_checkpoint_secs),
                      ('save_summaries_secs', save_summaries_secs)):
    arg_checks.check_seconds(value, name, allow_zero=True)
  arg_checks.check_count(max_to_keep, 'max_to_keep', zero_means='keeping all')
  arg_checks.check_seconds(keep_checkpoint_every_n_hours,
                           'keep_checkpoint_every_n_hours')
  hooks = check_hooks(hooks, 'hooks')
  chief_only_hooks = check_hooks(chief_only_hooks, 'chief_only_hooks')
  if scaffold is not None and checkpoint is not None:
    scaffold = Scaffold(copy_from_scaffold=scaffold, checkpoint=checkpoint)
  scaffold = scaffold or Scaffold(checkpoint=checkpoint)

  summary_dir = summary_dir or checkpoint_dir
  save_checkpoints = bool(checkpoint_dir and
                          (save_checkpoint_steps or save_checkpoint_secs))
  if not is_chief:
    session_creator = WorkerSessionCreator(
        scaffold=scaffold, master=master, config=config,
        max_wait_secs=max_wait_secs, checkpoint_dir=checkpoint_dir)
    if save_checkpoints and workers.current(strategy) is not None:
      hooks = [CheckpointSaverHook(
          checkpoint_dir, save_steps=save_checkpoint_steps,
          save_secs=save_checkpoint_secs, scaffold=scaffold, save_graph_def=False,
          max_to_keep=1)] + hooks
    return MonitoredSession(session_creator=session_creator, hooks=hooks,
                            stop_grace_period_secs=stop_grace_period_secs,
                            steps_per_loop=steps_per_loop, jit_compile=jit_compile,
                            strategy=strategy, profile_dir=summary_dir,
                            graceful_stop_signals=graceful_stop_signals)

  all_hooks = list(chief_only_hooks)
  save_summaries = bool(save_summaries_steps or save_summaries_secs)
  if summary_dir:
    if log_step_count_steps and log_step_count_steps > 0:
      all_hooks.append(StepCounterHook(output_dir=summary_dir,
                                       every_n_steps=log_step_count_steps))
    if save_summaries:
      all_hooks.append(SummarySaverHook(
          scaffold=scaffold, save_steps=save_summaries_steps,
          save_secs=save_summaries_secs, output_dir=summary_dir))
  if save_checkpoints:
    all_hooks.append(CheckpointSaverHook(
        checkpoint_dir, save_steps=save_checkpoint_steps,
        save_secs=save_checkpoint_secs, scaffold=scaffold,
        save_graph_def=save_graph_def, max_to_keep=max_to_keep,
        keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours))
  all_hooks.extend(hooks)
  session_creator = ChiefSessionCreator(
      scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config)
  return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                          stop_grace_period_secs=stop_grace_period_secs,
                          steps_per_loop=steps_per_loop, jit_compile=jit_compile,
                          strategy=strategy, profile_dir=summary_dir,
                          graceful_stop_signals=graceful_stop_signals)
