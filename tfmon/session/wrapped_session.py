"""WrappedSession: the base of the session layers, as v1's _WrappedSession."""

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon.session.step_context import StepContext

# The errors after which MonitoredSession re-creates its session and retries.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


class WrappedSession:
  """A layer over a RawSession or another layer.

  Each layer adds one concern (hooks, coordination, recovery) and can add its own
  stop condition in `_check_stop`. `close()` never raises preemption errors.
  """

  def __init__(self, sess):
    self._sess = sess
    self._wrapped_is_stoppable = isinstance(sess, WrappedSession)

  def should_stop(self):
    """True if this session should not be used any more (always once closed)."""
    if self._check_stop():
      return True
    if self._sess:
      return self._wrapped_is_stoppable and self._sess.should_stop()
    return True

  def _check_stop(self):
    return False

  def close(self):
    if self._sess:
      try:
        self._sess.close()
      except PREEMPTION_ERRORS as e:
        logging.error(
            'An error occurred when attempting to close the '
            'session. This may be due to a preemption in a '
            'connected worker or parameter server. Error: %s', e)
      finally:
        self._sess = None

  def run(self, *args, **kwargs):
    return self._sess.run(*args, **kwargs)

  def run_step_fn(self, step_fn, raw_session_fn, run_with_hooks=None):
    """Calls `step_fn(StepContext)` with the current raw session."""
    return step_fn(StepContext(raw_session_fn(), run_with_hooks or self.run))
