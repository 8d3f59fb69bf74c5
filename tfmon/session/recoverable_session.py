"""RecoverableSession: re-creates the session after a preemption and retries."""

from tfmon import tf_logging as logging

from tfmon.session.wrapped_session import PREEMPTION_ERRORS, WrappedSession

# v1's log lines, word for word: what happened, then this shared advice.
_ADVICE = (
    'This error may also occur due to a gRPC failure '
    'caused by high memory or network bandwidth usage in the '
    'parameter servers. If this error occurs repeatedly, try '
    'increasing the number of parameter servers assigned to '
    'the job. Error: %s')
_RECREATE = ('The current session will be closed and a new session will be '
             'created. ' + _ADVICE)
_ERROR_IN_RUN = ('An error was raised. This may be due to a preemption in '
                 'a connected worker or parameter server. ' + _RECREATE)
_ERROR_IN_CHECK_STOP = (
    'An error was raised while considering whether the session is complete. This '
    'may be due to a preemption in a connected worker or parameter server. ' +
    _RECREATE)
_ERROR_IN_CREATE = (
    'An error was raised while a session was being created. This may be due to a '
    'preemption of a connected worker or parameter server. A new session will be '
    'created. ' + _ADVICE)


class RecoverableSession(WrappedSession):
  """Re-creates its session on AbortedError or UnavailableError and retries.

  It knows nothing of hooks: its session creator builds the whole stack below,
  and re-creating it restores the latest checkpoint and calls the hooks'
  `after_create_session` again.

  Args:
    sess_creator: The creator of the session stack below.
  """

  def __init__(self, sess_creator):
    self._sess_creator = sess_creator
    super().__init__(self._create_session())

  def _create_session(self):
    while True:
      try:
        return self._sess_creator.create_session()
      except PREEMPTION_ERRORS as e:
        logging.info(_ERROR_IN_CREATE, e)

  def _check_stop(self):
    try:
      if self._sess:
        return self._sess._check_stop()  # pylint: disable=protected-access
      return True
    except PREEMPTION_ERRORS as e:
      logging.info(_ERROR_IN_CHECK_STOP, e)
      self.close()
      self._sess = self._create_session()
      return False  # a fresh session has not finished
    except Exception:  # pylint: disable=broad-except
      return True  # should_stop answers rather than raises

  def _retrying(self, call):
    while True:
      try:
        if not self._sess:
          self._sess = self._create_session()
        return call(self._sess)
      except PREEMPTION_ERRORS as e:
        logging.info(_ERROR_IN_RUN, e)
        self.close()
        self._sess = None

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    return self._retrying(lambda sess: sess.run(
        fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata))

  def run_step_fn(self, step_fn, raw_session_fn, run_with_hooks=None):
    del run_with_hooks  # always the current session's run, which changes on recovery
    return self._retrying(
        lambda sess: sess.run_step_fn(step_fn, raw_session_fn, sess.run))
