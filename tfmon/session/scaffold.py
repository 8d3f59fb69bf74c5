"""Scaffold: how a session initializes, checkpoints and summarizes what steps use."""

import tensorflow as tf

from tfmon import checkpointing
from tfmon import tf_logging as logging
from tfmon.compiled import graph_capture
from tfmon import summaries


def _check_callable(name, fn):
  if fn is not None and not callable(fn):
    raise TypeError(f'Scaffold {name} must be a callable taking (scaffold, session); '
                    f'got {fn!r} of type {type(fn).__name__}.')


class Scaffold:
  """Initialization pieces of a session, with v1's arguments.

  Eager variables hold their values from construction, so there is nothing like
  v1's global-variables initializer to run: `init_op` / `init_fn` run once, on the
  first creation of the session that has no checkpoint to restore; `local_init_op`
  / `local_init_fn` run on every creation (fresh, restored or recovered).

  The checkpoint is built on first use (by a session creator restoring, or by
  CheckpointSaverHook saving), so it includes the global step created by then.

  Args:
    init_op: Fetches (SPEC section 2) run once at the first creation.
    init_feed_dict: Feeds for `init_op`.
    init_fn: Called as `init_fn(scaffold, session)` after `init_op`.
    ready_op: Must be None: eager variables are always ready.
    ready_for_local_init_op: Must be None, for the same reason.
    local_init_op: Fetches run on every creation.
    summary_op: A callable, or a list of callables, whose `tf.summary` calls
      SummarySaverHook records on its trigger steps, besides the steps' own.
    saver: Alias of `checkpoint`, for v1 code; in a `tfmon.Graph` also a
      `tf.compat.v1.train.Saver`, whose variables are saved under their TF1 names.
    copy_from_scaffold: A Scaffold whose pieces fill those not given here.
    local_init_feed_dict: Feeds for `local_init_op`.
    local_init_fn: Called as `local_init_fn(scaffold, session)` on every creation.
    checkpoint: What checkpoints save and restore: a `tf.train.Checkpoint`, a
      `tf.train.CheckpointManager` (whose directory and file name then win) or a
      dict of trackables. The global step is always added.

  Raises:
    TypeError: a function that is not callable, or a `copy_from_scaffold` that
      is not a Scaffold.
    ValueError: a `ready_op` or `ready_for_local_init_op`, or both `saver` and
      `checkpoint`.
  """

  def __init__(self,
               init_op=None,
               init_feed_dict=None,
               init_fn=None,
               ready_op=None,
               ready_for_local_init_op=None,
               local_init_op=None,
               summary_op=None,
               saver=None,
               copy_from_scaffold=None,
               local_init_feed_dict=None,
               local_init_fn=None,
               checkpoint=None):
    for name, value in (('ready_op', ready_op),
                        ('ready_for_local_init_op', ready_for_local_init_op)):
      if value is not None:
        raise ValueError(
            f'Scaffold {name}={value!r} cannot be used: eager variables are '
            f'initialized when created, so there is no readiness to check. Drop {name}.')
    if saver is not None and checkpoint is not None:
      raise ValueError('Scaffold takes saver or checkpoint (its alias), not both.')
    checkpoint = checkpoint if checkpoint is not None else saver
    if copy_from_scaffold is not None:
      if not isinstance(copy_from_scaffold, Scaffold):
        raise TypeError('copy_from_scaffold is not a Scaffold instance.')
      init_op = init_op if init_op is not None else copy_from_scaffold.init_op
      init_feed_dict = init_feed_dict or copy_from_scaffold.init_feed_dict
      init_fn = init_fn or copy_from_scaffold._user_init_fn  # pylint: disable=protected-access
      local_init_op = (local_init_op if local_init_op is not None
                       else copy_from_scaffold.local_init_op)
      local_init_feed_dict = (local_init_feed_dict or
                              copy_from_scaffold.local_init_feed_dict)
      local_init_fn = local_init_fn or copy_from_scaffold._user_local_init_fn  # pylint: disable=protected-access
      summary_op = summary_op if summary_op is not None else copy_from_scaffold.summary_op
      checkpoint = (checkpoint if checkpoint is not None
                    else copy_from_scaffold._checkpoint_arg)  # pylint: disable=protected-access
    _check_callable('init_fn', init_fn)
    _check_callable('local_init_fn', local_init_fn)
    self.init_op = init_op
    self.init_feed_dict = init_feed_dict
    self.local_init_op = local_init_op
    self.local_init_feed_dict = local_init_feed_dict
    self.summary_op = summary_op
    self.summary_ops = summaries.summary_ops(summary_op)
    self._user_init_fn = init_fn
    self._user_local_init_fn = local_init_fn
    checkpointing.check_checkpoint_arg(checkpoint)
    self._checkpoint_arg = checkpoint
    self._missing_warned = []  # one warning for trained variables it misses
    self._checkpoint = None
    self._checkpoint_manager = None

  def finalize(self):
    """Finalizes a captured TF1 graph (`tfmon.Graph`), as v1 finalized its graph:
    the graph is complete once the hooks' `begin()` ran. Logs v1's line."""
    graph = graph_capture.current()
    if graph is not None and not graph.finalized:
      # TF1's default local_init_op initialized the graph's lookup tables (a
      # table TF 2 initializes when made lists None).
      tables = [op for op in graph.get_collection(
          tf.compat.v1.GraphKeys.TABLE_INITIALIZERS) if op is not None]
      if self.local_init_op is None and tables:
        with graph.as_default():
          self.local_init_op = tf.group(*tables, name='init_all_tables')
      graph.finalize()
    logging.info('Graph was finalized.')

  @property
  def checkpoint(self):
    """The `tf.train.Checkpoint` to save and restore, built on first use."""
    if self._checkpoint is None:
      self._checkpoint, self._checkpoint_manager = checkpointing.as_checkpoint(
          self._checkpoint_arg)
    return self._checkpoint

  @property
  def saves_step_variables(self):
    """Whether the checkpoint is the default: every variable the steps use."""
    return self._checkpoint_arg is None

  def watch_step_variables(self, session):
    """Keeps the checkpoint's variables in step with what `session`'s steps use.

    With no `checkpoint`, checkpoints hold every variable the steps read or
    write, as TF1's Saver held every variable, also those a step creates in its
    first trace (restored before it first runs). With one, a trained variable it
    misses is named in one warning.
    """
    checkpointing.watch_step_variables(
        session, lambda: self.checkpoint, self.saves_step_variables,
        self._missing_warned)

  def require_created_in_scope(self):
    """Raises ValueError if, under a tf.distribute strategy, a trainable variable
    given in `checkpoint` was created outside its scope."""
    if self._checkpoint_arg is not None and tf.distribute.has_strategy():
      checkpointing.require_created_in_scope(self.checkpoint)

  @property
  def checkpoint_manager(self):
    """The `tf.train.CheckpointManager` given as `checkpoint`, or None."""
    _ = self.checkpoint
    return self._checkpoint_manager

  def initialize(self, session):
    """Runs `init_op` then `init_fn`: once, when there is no checkpoint to restore.

    In a captured graph, first the initializers `tf.compat.v1.train.
    init_from_checkpoint` gave variables, which TF1's default `init_op` ran.
    """
    graph = graph_capture.current()
    initializers = graph.checkpoint_initializers() if graph is not None else []
    if initializers:
      session.run(initializers)
    if self.init_op is not None:
      session.run(self.init_op, feed_dict=self.init_feed_dict)
    if self._user_init_fn is not None:
      self._user_init_fn(self, session)

  def local_initialize(self, session):
    """Runs `local_init_op` then `local_init_fn`: on every session creation."""
    logging.info('Running local_init_op.')
    if self.local_init_op is not None:
      session.run(self.local_init_op, feed_dict=self.local_init_feed_dict)
    if self._user_local_init_fn is not None:
      self._user_local_init_fn(self, session)
    logging.info('Done running local_init_op.')
