"""CoordinatedSession: ties a session to a tf.train.Coordinator."""

from tfmon.session.wrapped_session import PREEMPTION_ERRORS, WrappedSession


class CoordinatedSession(WrappedSession):
  """Stops when the coordinator says so, and joins its threads on close.

  An exception a thread reported to the coordinator is re-raised from `run` or
  `should_stop`, since it is the root cause of whatever the run saw.

  Args:
    sess: The session layer below.
    coord: A `tf.train.Coordinator`.
    stop_grace_period_secs: Seconds given to threads to stop after `close()`.
  """

  def __init__(self, sess, coord, stop_grace_period_secs=120):
    super().__init__(sess)
    self._coord = coord
    self._stop_grace_period_secs = stop_grace_period_secs

  def _check_stop(self):
    self._coord.raise_requested_exception()
    return self._coord.should_stop()

  def close(self):
    self._coord.request_stop()
    try:
      self._coord.join(
          stop_grace_period_secs=self._stop_grace_period_secs,
          ignore_live_threads=True)
    finally:
      try:
        WrappedSession.close(self)
      except Exception:  # pylint: disable=broad-except
        pass  # join() already reported the useful exceptions

  def run(self, *args, **kwargs):
    try:
      return self._sess.run(*args, **kwargs)
    except PREEMPTION_ERRORS:
      raise
    except Exception as original_exception:  # pylint: disable=broad-except
      # A preemption reported by a thread is the root cause: raise it instead.
      try:
        self._coord.raise_requested_exception()
      except PREEMPTION_ERRORS:
        raise
      except Exception:  # pylint: disable=broad-except
        raise original_exception from None
      else:
        raise
