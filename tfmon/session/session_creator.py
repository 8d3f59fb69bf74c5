"""Session creators: build the RawSession, then restore or initialize what it runs."""

import copy
import os

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import checkpointing
from tfmon import paths
from tfmon import workers
from tfmon.compiled import graph_capture
from tfmon.session import graph_mode
from tfmon.session.raw_session import RawSession
from tfmon.session.scaffold import Scaffold

# TensorFlow's abstract base: a creator is anything with `create_session()`.
SessionCreator = tf.compat.v1.train.SessionCreator


def refuse_tensorflows_own(argument, value, classes, takes, why=''):
  """Raises TypeError, naming tfmon's class to use, if `value` is an instance
  of one of TensorFlow's `tf.compat.v1.train` `classes` (a port that renamed
  the session but not what it is given)."""
  tf_class = next((c for c in classes if isinstance(value, c)), None)
  if tf_class is not None:
    raise TypeError(
        f'{argument} {value!r} is TensorFlow\'s tf.compat.v1.train.{tf_class.__name__}'
        f'{why}; a tfmon session takes tfmon.train.{takes}, with the same arguments '
        '(rename tf.compat.v1.train. to tfmon.train. there too).')


def _check_scaffold(scaffold):
  if scaffold is None:
    return Scaffold()
  refuse_tensorflows_own('scaffold', scaffold, [tf.compat.v1.train.Scaffold], 'Scaffold')
  if not isinstance(scaffold, Scaffold):
    raise TypeError(f'scaffold must be a tfmon.train.Scaffold; got {scaffold!r} of '
                    f'type {type(scaffold).__name__}.')
  return scaffold


def _restore_latest(scaffold, checkpoint_dir, checkpoint_filename_with_path=None):
  """Restores the scaffold's checkpoint from the latest on disk; returns its
  path, or None if there was none.

  A damaged newest checkpoint is set aside and an older good one restored; a
  directory with only damaged ones is refused (checkpointing.restore_latest).
  First checks that what it holds fits the strategy the session works under.
  """
  scaffold.require_created_in_scope()
  if checkpoint_filename_with_path:
    checkpointing.restore(scaffold.checkpoint, checkpoint_filename_with_path)
    return checkpoint_filename_with_path
  # The newest good checkpoint: damaged ones are set aside, with a log line.
  return checkpointing.restore_latest(lambda: scaffold.checkpoint, checkpoint_dir)


def _restore_in_turn(session, scaffold, restore):
  """Runs `restore()` (returning the path restored, or None), in a multi-worker
  session after the chief's, and keeps the path as `session.restored_from`.

  The chief restores first, since it sets aside a damaged newest checkpoint
  and rewrites the state file; the other workers then read what it left, and
  no worker goes on before all have restored: the chief's first save (at
  creation) cannot land while another worker is still reading.
  """
  agreement = session.agreement
  if agreement is None:
    session.restored_from = restore()
    return session.restored_from
  # A variable made under the strategy is initialized by a broadcast from the
  # chief, a collective op: made by a restore on the chief alone, the
  # checkpoint's save counter would block it. Every worker makes it now.
  _ = scaffold.checkpoint.save_counter
  chief = workers.is_chief(agreement.strategy)
  restored = restore() if chief else None
  agreement.barrier()  # the chief has restored
  if not chief:
    restored = restore()
  agreement.barrier()  # every worker has
  session.restored_from = restored
  return restored


def _raw_session(xla):
  """A RawSession; on a captured graph whose ConfigProto asked for XLA
  (`global_jit_level`), auto-clustering its functions as TF1's did."""
  session = RawSession()
  if xla and session.graph is not None:
    session.set_jit_compile(True)
  return session


def warn_unused(master, config):
  """Warns of `master` and of what `config` asks beyond TF2's defaults: a tfmon
  session runs in this process, configured by `tf.config`."""
  if master:
    logging.warning(
        'master=%r is ignored: each worker runs its steps in its own process. '
        'For multi-worker training create tf.distribute.MultiWorkerMirroredStrategy() '
        '(TF_CONFIG says where the workers are) and pass it as strategy=.', master)
  if config is None:
    return
  if not isinstance(config, tf.compat.v1.ConfigProto):
    logging.warning('config=%r is ignored: configure TensorFlow with tf.config '
                    'instead.', config)
    return
  if graph_mode.wants_xla(config) and graph_capture.current() is not None:
    config = copy.deepcopy(config)  # applied to a captured graph: RawSession
    config.graph_options.optimizer_options.ClearField('global_jit_level')
    if not config.graph_options.optimizer_options.ListFields():
      config.graph_options.ClearField('optimizer_options')
    if not config.graph_options.ListFields():
      config.ClearField('graph_options')
  unapplied = _unapplied_settings(config)
  if unapplied:
    logging.warning('config sets %s, which tfmon does not apply: configure '
                    'TensorFlow with tf.config instead.', ', '.join(unapplied))


def _unapplied_settings(config):
  """The fields of the ConfigProto `config` that ask for what eager TensorFlow
  does not already do.

  TF1 scripts pass a ConfigProto of defaults (TF's CIFAR-10 tutorial:
  `log_device_placement=False`) or `allow_soft_placement=True`, which TF2 does
  by default: nothing to warn of, as TF1 printed nothing.
  """
  return [field.name for field, value in config.ListFields()  # set, not default
          if not (field.name == 'allow_soft_placement' and
                  value == tf.config.get_soft_device_placement())]


class ChiefSessionCreator(SessionCreator):
  """Creates a session that restores or initializes the model (v1's chief).

  Every creation (the first, and each recovery) restores the latest checkpoint in
  `checkpoint_dir` (or `checkpoint_filename_with_path`) when there is one. With
  nothing to restore, the scaffold's `init_op` / `init_fn` run on the first
  creation only: eager variables keep their values across a recovery. Then the
  scaffold's local init runs.

  Args:
    scaffold: A `Scaffold`, or None for the default.
    master: Ignored, with a warning: tfmon runs in this process.
    config: A `tf.compat.v1.ConfigProto`, not applied (a warning names what it
      sets beyond TF2's defaults: use `tf.config`), except its XLA
      `global_jit_level` on a captured graph (auto-clustering, as TF1's).
    checkpoint_dir: A directory to restore the latest checkpoint from.
    checkpoint_filename_with_path: A checkpoint to restore (wins over the directory).
  """

  def __init__(self, scaffold=None, master='', config=None, checkpoint_dir=None,
               checkpoint_filename_with_path=None):
    self._scaffold = _check_scaffold(scaffold)
    warn_unused(master, config)
    self._xla = graph_mode.wants_xla(config)
    checkpoint_dir = paths.check_directory(checkpoint_dir, 'checkpoint_dir')
    if checkpoint_filename_with_path is not None and not isinstance(
        checkpoint_filename_with_path, (str, os.PathLike)):
      raise TypeError(
          f'checkpoint_filename_with_path={checkpoint_filename_with_path!r} of type '
          f'{type(checkpoint_filename_with_path).__name__} is not a path: give a '
          "checkpoint prefix such as '/train/model.ckpt-1000'.")
    self._checkpoint_dir = checkpoint_dir
    self._checkpoint_filename_with_path = (
        checkpoint_filename_with_path and os.fspath(checkpoint_filename_with_path))
    self._initialized = False

  def create_session(self):
    self._scaffold.finalize()
    session = _raw_session(self._xla)
    self._scaffold.watch_step_variables(session)
    restored = _restore_in_turn(session, self._scaffold, lambda: _restore_latest(
        self._scaffold, self._checkpoint_dir, self._checkpoint_filename_with_path))
    if not restored and not self._initialized:
      self._scaffold.initialize(session)
    self._initialized = True
    self._scaffold.local_initialize(session)
    return session


class WorkerSessionCreator(SessionCreator):
  """Creates a session for a non-chief worker, which leaves init to the chief.

  Args:
    scaffold: A `Scaffold`, or None for the default.
    master: Ignored, with a warning: tfmon runs in this process.
    config: A `tf.compat.v1.ConfigProto`, not applied (a warning names what it
      sets beyond TF2's defaults: use `tf.config`), except its XLA
      `global_jit_level` on a captured graph (auto-clustering, as TF1's).
    max_wait_secs: Accepted for v1 compatibility: eager variables never wait.
    checkpoint_dir: A directory whose latest checkpoint, if any, is restored.
  """

  def __init__(self, scaffold=None, master='', config=None, max_wait_secs=30 * 60,
               checkpoint_dir=None):
    self._scaffold = _check_scaffold(scaffold)
    warn_unused(master, config)
    self._xla = graph_mode.wants_xla(config)
    del max_wait_secs
    self._checkpoint_dir = paths.check_directory(checkpoint_dir, 'checkpoint_dir')

  def create_session(self):
    self._scaffold.finalize()
    session = _raw_session(self._xla)
    self._scaffold.watch_step_variables(session)
    restored = _restore_in_turn(
        session, self._scaffold, lambda: _restore_latest(self._scaffold, self._checkpoint_dir))
    if session.agreement is not None and not restored:
      # Under MultiWorkerMirroredStrategy each worker holds its own copy of
      # every variable: what the chief's init_fn sets, each worker must set.
      self._scaffold.initialize(session)
    self._scaffold.local_initialize(session)
    return session
