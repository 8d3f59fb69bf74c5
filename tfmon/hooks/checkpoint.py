"""CheckpointSaverHook and CheckpointSaverListener, on tf.train.CheckpointManager."""

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import arg_checks
from tfmon import checkpointing
from tfmon import paths
from tfmon import training_util
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger

# TensorFlow's own class: listeners written for TF1 work unchanged.
CheckpointSaverListener = tf.compat.v1.train.CheckpointSaverListener


class CheckpointSaverHook(SessionRunHook):
  """Saves checkpoints every N steps or seconds, as v1's.

  Saves the state a session is created with (unless the latest checkpoint
  already holds that global step, as after a restore: re-writing it could only
  damage it), on its timer, and at `end` when the last step was not saved. The
  creation checkpoint is written once the first step is traced, before it runs,
  so that it holds the variables that trace creates, as TF1's held every one.
  Files are `<checkpoint_dir>/<checkpoint_basename>-<step>.index/.data-*` and
  the `checkpoint` state file, written by `tf.train.CheckpointManager`. A
  listener whose `after_save` returns True stops training.

  Args:
    checkpoint_dir: Directory for the checkpoints.
    save_secs: Save every N seconds.
    save_steps: Save every N steps.
    saver: What to save: a `tf.train.Checkpoint`, a `tf.train.CheckpointManager`
      (whose directory and file name then win) or a dict of trackables.
    checkpoint_basename: The checkpoint file name.
    scaffold: A `Scaffold` whose `checkpoint` is saved.
    listeners: `CheckpointSaverListener`s.
    save_graph_def: On a captured TF1 graph (`tfmon.Graph`), write it as
      `graph.pbtxt` into `checkpoint_dir` when a session is created, as TF1 did
      (SummarySaverHook writes the graph for TensorBoard). Step functions have
      no graph to write.
    max_to_keep: Checkpoints kept (TF2 only; None keeps all).
    keep_checkpoint_every_n_hours: Also keep one checkpoint every N hours (TF2 only).

  Raises:
    ValueError: both `saver` and `scaffold`, or not exactly one of `save_secs`
      and `save_steps`.
  """

  def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
               checkpoint_basename='model.ckpt', scaffold=None, listeners=None,
               save_graph_def=True, max_to_keep=5, keep_checkpoint_every_n_hours=None):
    logging.info('Create CheckpointSaverHook.')
    if saver is not None and scaffold is not None:
      raise ValueError('You cannot provide both saver and scaffold.')
    checkpointing.check_checkpoint_arg(saver, 'saver')
    if not checkpoint_dir and not isinstance(saver, tf.train.CheckpointManager):
      raise ValueError('CheckpointSaverHook needs a checkpoint_dir (or a '
                       'tf.train.CheckpointManager as saver).')
    checkpoint_dir = paths.check_directory(checkpoint_dir, 'checkpoint_dir')
    arg_checks.check_count(save_steps, 'save_steps')
    arg_checks.check_seconds(save_secs, 'save_secs')
    arg_checks.check_count(max_to_keep, 'max_to_keep')
    arg_checks.check_seconds(keep_checkpoint_every_n_hours,
                             'keep_checkpoint_every_n_hours')
    if not isinstance(checkpoint_basename, str) or not checkpoint_basename:
      raise TypeError(f'checkpoint_basename={checkpoint_basename!r} must be a '
                      "non-empty file name such as 'model.ckpt'.")
    listeners = arg_checks.check_list_of(
        listeners, CheckpointSaverListener, 'listeners', 'listener')
    self._saver = saver
    self._scaffold = scaffold
    self._missing_warned = []  # one warning for trained variables saver misses
    self._checkpoint_dir = checkpoint_dir
    self._checkpoint_basename = checkpoint_basename
    self._max_to_keep = max_to_keep
    self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=save_secs, every_steps=save_steps)
    self._save_steps = save_steps
    self._listeners = listeners or []
    self._save_graph_def = save_graph_def
    # TF's name and value, which subclasses read and set (TPUEstimator): how far
    # the global step may move in a run; so high that a run on which the timer
    # may trigger always reads the step it left, as TF's hook did.
    self._steps_per_run = 1000000
    self._writer = None
    self._creation_save = None  # (session, step) of a creation save not yet written

  def _set_steps_per_run(self, steps_per_run):
    """As TF's: how far the global step moves in a run (see `__init__`)."""
    self._steps_per_run = steps_per_run

  def begin(self):
    self._global_step_tensor = training_util.require_global_step(
        'CheckpointSaverHook')
    for listener in self._listeners:
      listener.begin()

  def _checkpoint_writer(self):
    # Built at the first save, after the session creator finalized the scaffold
    # and every hook's begin() could still add to the model.
    if self._writer is None:
      if self._scaffold is not None:
        checkpoint = self._scaffold.checkpoint
        manager = self._scaffold.checkpoint_manager
      else:
        checkpoint, manager = checkpointing.as_checkpoint(self._saver, 'saver')
      self._writer = checkpointing.CheckpointWriter(
          checkpoint, manager, directory=self._checkpoint_dir,
          basename=self._checkpoint_basename, max_to_keep=self._max_to_keep,
          keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours)
    return self._writer

  @property
  def last_checkpoint(self):
    """The path of the latest checkpoint in the directory, or None."""
    if self._writer is None:
      return None
    # Read anew: on a worker that is not the chief, the chief wrote it.
    return tf.train.latest_checkpoint(self._writer.manager.directory)

  def after_create_session(self, session, coord):
    if self._scaffold is None:  # a scaffold's creator watches its checkpoint
      checkpointing.watch_step_variables(
          session, lambda: self._checkpoint_writer().manager.checkpoint,
          self._saver is None, self._missing_warned)
    graph = getattr(session, 'graph', None)
    if self._save_graph_def and graph is not None and self._checkpoint_dir:
      tf.io.write_graph(graph.as_graph_def(add_shapes=True), self._checkpoint_dir,
                        'graph.pbtxt')
    global_step = int(session.run(self._global_step_tensor))
    if getattr(session, 'agreement', None) is None:
      saved = self._checkpoint_writer().latest_step_saved()
    else:
      # Every worker decides alike, from the checkpoint all of them restored:
      # the chief may already be writing a new one.
      saved = checkpointing.step_of(session.restored_from)
    self._timer.update_last_triggered_step(global_step)
    self._creation_save = None
    if saved == global_step:
      return
    if (not self._filled_by_first_trace() or
        not getattr(session, 'runs_steps', False) or session.agreement is not None):
      # What it holds is known now (checkpoint= of built objects), or under
      # Keras fit, or with workers, which save together at creation (every
      # worker makes the same calls): saved here, as TF1 saved, before later
      # hooks' after_create_session.
      self._save(session, global_step)
      return
    # TF1 built every variable before the session, so its creation checkpoint
    # held them all; a step may create its variables (get_variable, an
    # optimizer's slots) in its first trace. So the default checkpoint, or one
    # holding an unbuilt Keras object, is written once the step is traced,
    # before it first runs: every variable, as training starts from it. The
    # listener is called at once if a step was traced.
    self._creation_save = (session, global_step)
    session.add_variable_listener(lambda variables: self._save_creation_checkpoint())

  def _filled_by_first_trace(self):
    """Whether what the checkpoint holds is known only once a step is traced:
    the default checkpoint, or one holding a Keras object not built yet."""
    if self._scaffold is not None:
      if self._scaffold.saves_step_variables:
        return True
    elif self._saver is None:
      return True
    return checkpointing.holds_unbuilt_objects(self._checkpoint_writer().manager.checkpoint)

  def steps_until_observed(self, global_step):
    return steps_until_trigger(self._timer, self._save_steps, global_step)

  def before_run(self, run_context):
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    agreement = getattr(run_context.session, 'agreement', None)
    if agreement is not None and self._save_steps is None:
      self._after_run_agreeing(run_context, agreement)
      return
    stale_global_step = run_values.results
    if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
      # The fetched value is from before the step: read the real one.
      global_step = training_util.global_step_after_run(
          run_context, self._global_step_tensor)
      if self._timer.should_trigger_for_step(global_step):
        self._timer.update_last_triggered_step(global_step)
        if self._save(run_context.session, global_step):
          run_context.request_stop()

  def _after_run_agreeing(self, run_context, agreement):
    """A multi-worker session's save on a timer in seconds: the workers' clocks
    differ, so a worker whose timer fires asks for a save at the next call, and
    every worker saves after the call that agrees to it."""
    global_step = training_util.global_step_after_run(
        run_context, self._global_step_tensor)
    if agreement.agreed_save:
      self._timer.update_last_triggered_step(global_step)
      if self._save(run_context.session, global_step):
        run_context.request_stop()
    elif self._timer.should_trigger_for_step(global_step):
      agreement.wanted_save = True

  def _save_creation_checkpoint(self):
    if self._creation_save is not None:
      session, step = self._creation_save
      self._creation_save = None  # tried once, as a save at creation would be
      self._save(session, step)  # as v1's, a listener's stop request is not heard

  def end(self, session):
    self._save_creation_checkpoint()  # no step ran
    last_step = int(session.run(self._global_step_tensor))
    if last_step != self._timer.last_triggered_step():
      self._save(session, last_step)
    for listener in self._listeners:
      listener.end(session, last_step)

  def _save(self, session, step):
    """Saves the checkpoint for `step`; returns True if a listener asks to stop."""
    writer = self._checkpoint_writer()
    logging.info('Calling checkpoint listeners before saving checkpoint %d...', step)
    for listener in self._listeners:
      listener.before_save(session, step)
    logging.info('Saving checkpoints for %d into %s.', step,
                 paths.as_given(writer.save_path))
    writer.save(step)
    logging.info('Calling checkpoint listeners after saving checkpoint %d...', step)
    should_stop = False
    for listener in self._listeners:
      if listener.after_save(session, step):
        logging.info('A CheckpointSaverListener requested that training be stopped. '
                     'listener: %s', listener)
        should_stop = True
    return should_stop
