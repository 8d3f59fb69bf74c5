"""Session creators: build the RawSession and initialize what it runs."""

from absl import logging
import tensorflow as tf

from tfmon.session.raw_session import RawSession
from tfmon.session.scaffold import Scaffold

# TensorFlow's abstract base: a creator is anything with `create_session()`.
SessionCreator = tf.compat.v1.train.SessionCreator


def _check_scaffold(scaffold):
  if scaffold is None:
    return Scaffold()
  if not isinstance(scaffold, Scaffold):
    raise TypeError(f'scaffold must be a tfmon.train.Scaffold; got {scaffold!r} of '
                    f'type {type(scaffold).__name__}.')
  return scaffold


def _warn_unused(master, config):
  if master:
    logging.warning(
        'master=%r is ignored: tfmon runs in this process. For multi-worker '
        'training pass a tf.distribute strategy.', master)
  if config is not None:
    logging.warning('config is ignored: configure TensorFlow with tf.config instead.')


class ChiefSessionCreator(SessionCreator):
  """Creates a session that initializes the model (v1's chief).

  Args:
    scaffold: A `Scaffold`, or None for the default.
    master: Ignored, with a warning: tfmon runs in this process.
    config: Ignored, with a warning: use `tf.config`.
  """

  def __init__(self, scaffold=None, master='', config=None):
    self._scaffold = _check_scaffold(scaffold)
    _warn_unused(master, config)
    # Eager variables keep their values when the session is re-created after a
    # preemption, so initialization runs on the first creation only.
    self._initialized = False

  def create_session(self):
    session = RawSession()
    if not self._initialized:
      self._scaffold.initialize(session)
      self._initialized = True
    self._scaffold.local_initialize(session)
    return session


class WorkerSessionCreator(SessionCreator):
  """Creates a session for a non-chief worker, which leaves init to the chief.

  Args:
    scaffold: A `Scaffold`, or None for the default.
    master: Ignored, with a warning: tfmon runs in this process.
    config: Ignored, with a warning: use `tf.config`.
    max_wait_secs: Accepted for v1 compatibility: eager variables never wait.
  """

  def __init__(self, scaffold=None, master='', config=None, max_wait_secs=30 * 60):
    self._scaffold = _check_scaffold(scaffold)
    _warn_unused(master, config)
    del max_wait_secs

  def create_session(self):
    session = RawSession()
    self._scaffold.local_initialize(session)
    return session
