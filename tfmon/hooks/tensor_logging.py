"""LoggingTensorHook: logs tensors every N local iterations or seconds, as v1's."""

import numbers

from tfmon import tf_internals
from tfmon import tf_logging as logging
import numpy as np
import tensorflow as tf

from tfmon.compiled import fetch_plan
from tfmon.compiled import graph_capture
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger


def _tag(item):
  """The tag of an item of a `tensors` list: what the log line calls it."""
  if isinstance(item, str):
    return item
  if isinstance(item, tf.Tensor) and tf.is_symbolic_tensor(item):
    # A captured graph's tensor (`LoggingTensorHook([loss])`), which TF1 took
    # in a list as it took names: tagged by its name, as a variable is.
    return item.name
  kind = fetch_plan.leaf_kind(item)
  if kind == fetch_plan.VARIABLE:
    # Keras variables keep their full name in `path`; tf.Variables in `name`.
    return getattr(item, 'path', None) or item.name
  if kind == fetch_plan.STEP:
    # `accuracy`, not `make_metrics.<locals>.accuracy`: a tag is read in logs.
    return getattr(item, '__name__', None) or fetch_plan.describe(item)
  raise TypeError(
      f'LoggingTensorHook tensors holds {item!r} of type {type(item).__name__}. '
      'A tensors list holds tensor names, graph tensors, variables or step '
      'functions; to log '
      "anything else, give it a tag with a dict: tensors={'tag': value}.")


def _tags_and_tensors(tensors):
  """Returns v1's tag order and the dict from tag to fetch that is logged."""
  if isinstance(tensors, dict):
    for tag, fetches in tensors.items():
      if not isinstance(tag, str):
        raise TypeError(f'LoggingTensorHook tensors has the tag {tag!r} of type '
                        f'{type(tag).__name__}; tags are strings.')
      fetch_plan.check_fetches(fetches, f'LoggingTensorHook tensors[{tag!r}]')
    return sorted(tensors), dict(tensors)
  if isinstance(tensors, str):
    raise TypeError(f'LoggingTensorHook tensors is the string {tensors!r}; pass a '
                    f'list of names ([{tensors!r}]) or a dict of tags to tensors.')
  try:
    items = list(tensors)
  except TypeError:
    raise TypeError(
        f'LoggingTensorHook tensors must be a dict of tags to tensors or a list of '
        f'tensor names; got {tensors!r} of type {type(tensors).__name__}.') from None
  tag_order = [_tag(item) for item in items]
  by_tag = {}
  for tag, item in zip(tag_order, items):
    previous = by_tag.get(tag, item)
    # The same name twice is v1's repeated tag; two different things are a clash.
    if previous is not item and not (isinstance(previous, str) and previous == item):
      raise ValueError(
          f'LoggingTensorHook tensors has two items tagged {tag!r}: give them '
          "distinct tags with a dict, tensors={'tag': value, ...}.")
    by_tag[tag] = item
  return tag_order, by_tag


def _holds_a_name(fetches):
  """Whether a nest of fetches holds a tensor name, which only a step's run resolves."""
  return any(isinstance(leaf, str) for leaf in tf.nest.flatten(fetches))


def _check_every(value, arg_name):
  if value is not None and (isinstance(value, bool) or
                            not isinstance(value, numbers.Real)):
    raise TypeError(f'LoggingTensorHook {arg_name} must be a number; got {value!r} '
                    f'of type {type(value).__name__}.')


class LoggingTensorHook(SessionRunHook):
  """Logs the given tensors every N local iterations, every N seconds, or at end.

  As v1's: the tensors are logged at INFO level, as `tag = value, ...` with the
  seconds since the previous log line appended (`loss = 0.5, step = 3 (0.004
  sec)`), tags of a dict sorted and tags of a list in list order, and values
  printed with `np.printoptions(suppress=True)`. `every_n_iter` counts the runs
  of this session (local iterations), not the global step: the first run logs,
  then every N-th. Runs that do not log fetch nothing.

  The tensors are anything `run` fetches (SPEC section 2): a name (a key of the
  dict a step function of the run returns, as `'loss'`, or a tensor name of the
  traced graph, as `'softmax_tensor'`), a step function, a variable, or a nest.
  On a captured TF1 graph (`tfmon.Graph`) a name is taken as TF1 took it, in
  `begin()`: an operation's name stands for its sole output ('xent' logs
  'xent:0'), and a name the graph lacks raises there.
  A list names its items: a name is its own tag, a variable or a captured
  graph's tensor is tagged with its name and a step function with its
  `__name__`.

  With `at_end`, as v1, `end()` evaluates the tensors after the last step:
  variables are read and step functions run again through the session (v1
  re-ran tensors in `end()`; a step function that trains trains once more).
  Names are the exception: a name only resolves in a run that runs the step
  function returning it, and `end()` runs no step, so a name is fetched on
  every run and `end()` logs its value from the last run (what v1's
  re-evaluation gave for a tensor that has no side effects). Tags whose tensors
  hold no name cost nothing until `end()`. If the session ran nothing and some
  tag holds a name, nothing is logged at end.

  Args:
    tensors: A dict from string tags to tensors to fetch, or a list of tensor
      names (or variables, or step functions).
    every_n_iter: Log once every N local iterations.
    every_n_secs: Log once every N seconds. Exactly one of `every_n_iter` and
      `every_n_secs` should be provided, unless only `at_end` is wanted.
    at_end: Whether to log the values of the last run when the session ends.
    formatter: A function taking the dict from tag to numpy value and returning
      the string to log, instead of the default line.

  Raises:
    ValueError: if neither `at_end` nor exactly one of `every_n_iter` and
      `every_n_secs` is given, if `every_n_iter` is not positive, or if two
      items of a `tensors` list have the same tag.
    TypeError: if `tensors` holds something `run` cannot fetch, or an argument
      has the wrong type.
  """

  def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
               formatter=None):
    only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
    if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
      raise ValueError(
          'either at_end and/or exactly one of every_n_iter and every_n_secs '
          'must be provided.')
    _check_every(every_n_iter, 'every_n_iter')
    _check_every(every_n_secs, 'every_n_secs')
    if every_n_iter is not None and every_n_iter <= 0:
      raise ValueError('invalid every_n_iter=%s.' % every_n_iter)
    if formatter is not None and not callable(formatter):
      raise TypeError(f'LoggingTensorHook formatter must be a function from the dict '
                      f'of tag to value to a string; got {formatter!r}.')
    self._tag_order, self._tensors = _tags_and_tensors(tensors)
    self._formatter = formatter
    self._timer = tf_internals.NeverTriggerTimer() if only_log_at_end else (
        tf.compat.v1.train.SecondOrStepTimer(every_secs=every_n_secs,
                                             every_steps=every_n_iter))
    self._log_at_end = at_end
    self._every_n_iter = every_n_iter
    self._every_n_secs = every_n_secs
    self._current_tensors = self._tensors
    self._split_at_end()

  def _split_at_end(self):
    """At end, names come from the last run (end() runs no step); anything else
    is evaluated again in end(), as v1 did."""
    self._named_at_end = {
        tag: fetches for tag, fetches in self._current_tensors.items()
        if self._log_at_end and _holds_a_name(fetches)}
    self._evaluated_at_end = {
        tag: fetches for tag, fetches in self._current_tensors.items()
        if self._log_at_end and tag not in self._named_at_end}
    # Hooks that fetch on every run (names at end) or watch the clock see every
    # run; fused runs still end at the iterations this hook logs.
    self.observes_fused_runs = (bool(self._named_at_end) or
                                self._every_n_secs is not None)

  def steps_until_observed(self, global_step):
    """Iterations until the next log line (one global step per iteration)."""
    del global_step  # this hook counts its own iterations, as v1's
    if isinstance(self._timer, tf_internals.NeverTriggerTimer):
      return None
    # The next run's first iteration is _iter_count; the one to log, last + N.
    return steps_until_trigger(self._timer, self._every_n_iter, self._iter_count - 1)

  def begin(self):
    self._timer.reset()
    self._iter_count = 0
    self._last_values = None
    graph = graph_capture.current()
    # On a captured graph, names are its tensors, taken here as TF1 took them.
    self._current_tensors = self._tensors if graph is None else {
        tag: tf.nest.map_structure(
            lambda leaf: tf_internals.graph_element(graph, leaf) if isinstance(leaf, str) else leaf,
            fetches)
        for tag, fetches in self._tensors.items()}
    self._split_at_end()

  def before_run(self, run_context):
    # Runs this hook did not see, and the other steps of a fused run, count too.
    self._iter_count += getattr(run_context, 'steps_run', 1) - 1
    self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
    if self._should_trigger:
      return SessionRunArgs(self._current_tensors)
    if self._named_at_end:
      return SessionRunArgs(self._named_at_end)
    return None

  def after_run(self, run_context, run_values):
    if self._should_trigger:
      self._log_tensors(run_values.results)
    if self._named_at_end:
      self._last_values = {tag: run_values.results[tag] for tag in self._named_at_end}
    self._iter_count += 1

  def end(self, session):
    if not self._log_at_end:
      return
    if self._named_at_end and self._last_values is None:
      return  # no run: the names have no value
    values = dict(self._last_values or {})
    if self._evaluated_at_end:
      values.update(session.run(self._evaluated_at_end))
    self._log_tensors(values)

  def _log_tensors(self, tensor_values):
    with np.printoptions(suppress=True):
      elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
      if self._formatter:
        logging.info(self._formatter(tensor_values))
        return
      stats = ', '.join(
          '%s = %s' % (tag, tensor_values[tag]) for tag in self._tag_order)
      if elapsed_secs is not None:
        logging.info('%s (%.3f sec)', stats, elapsed_secs)
      else:
        logging.info('%s', stats)
