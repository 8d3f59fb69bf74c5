"""StepContext: what `MonitoredSession.run_step_fn` hands its step function."""


class StepContext:
  """Control flow instrument for the `step_fn` of `run_step_fn()`.

  `session` runs fetches without hooks, `run_with_hooks` runs them as
  `MonitoredSession.run` does, and `request_stop` ends the loop.

  Args:
    session: The RawSession.
    run_with_hooks_fn: A function running fetches with hooks.
  """

  def __init__(self, session, run_with_hooks_fn):
    self._session = session
    self._run_with_hooks_fn = run_with_hooks_fn

  @property
  def session(self):
    return self._session

  def run_with_hooks(self, *args, **kwargs):
    """Same as `MonitoredSession.run`. Accepts the same arguments."""
    return self._run_with_hooks_fn(*args, **kwargs)

  def request_stop(self):
    """Exits the training loop: `run_step_fn` raises StopIteration, which `with` absorbs.

    Raises:
      StopIteration
    """
    raise StopIteration('step_fn has requested the iterations to stop.')
