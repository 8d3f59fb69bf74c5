"""FeedFnHook: feeds step-function parameters from a function on every run, as v1's."""

from tfmon.hook_api import SessionRunArgs, SessionRunHook


class FeedFnHook(SessionRunHook):
  """Runs `feed_fn` before every run and feeds what it returns.

  Feed keys are step-function parameter names (SPEC section 2): a step
  `def step(images, labels)` is fed by a `feed_fn` returning
  `{'images': ..., 'labels': ...}`. A key the caller feeds too raises v1's
  `RuntimeError('Same tensor is fed by a SessionRunHook and user. ...')`.

  Args:
    feed_fn: A function taking no arguments and returning a dict from parameter
      names to values (numpy arrays, Python numbers or tensors).

  Raises:
    TypeError: if `feed_fn` is not callable.
  """

  def __init__(self, feed_fn):
    if not callable(feed_fn):
      raise TypeError(f'FeedFnHook feed_fn must be a function returning a feed_dict; '
                      f'got {feed_fn!r} of type {type(feed_fn).__name__}.')
    self.feed_fn = feed_fn

  def steps_until_observed(self, global_step):
    del global_step  # unused
    return 1  # feeds change every step: every run is one step, and fed

  def before_run(self, run_context):
    feed_dict = self.feed_fn()
    if not isinstance(feed_dict, dict):
      raise TypeError(
          f'FeedFnHook feed_fn returned {feed_dict!r} of type '
          f'{type(feed_dict).__name__}; it must return a dict from step-function '
          "parameter names to values, e.g. {'images': batch}.")
    return SessionRunArgs(fetches=None, feed_dict=feed_dict)
