"""HookedSession: merges every hook's SessionRunArgs into the caller's run."""

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import training_util
from tfmon.hook_api import SessionRunArgs, SessionRunContext, SessionRunValues
from tfmon.profiling import Traces, discard_unfinished_trace
from tfmon.session import raw_session
from tfmon.session.observation_schedule import ObservationSchedule, declares_schedule
from tfmon.session.wrapped_session import WrappedSession

# Larger than any global step: "no hook needs to see a run end at a given step".
_NO_TARGET = 2**62


class HookedSession(WrappedSession):
  """Calls `before_run` of the hooks, runs once, then calls their `after_run`.

  The caller's fetches and the fetches of every hook that asked for something
  this run go down as one list, `[caller_fetches, hook_fetches, ...]`, so the
  layer below runs them in one compiled call: the caller's step functions first,
  then the hooks' in hook order. A hook that fetches nothing adds nothing.

  When hooks say when they need to see a run (see ObservationSchedule) or
  `steps_per_loop` > 1, an ObservationSchedule decides, per run, how many steps it
  fuses into one compiled loop and which hooks observe it: idle hooks cost
  nothing, and a run fuses steps only while every hook allows it.

  In a multi-worker session (the raw session has an `agreement`), every run of
  a step function goes through the fused loop, fed runs one step at a time, so
  that each call agrees with the other workers first; a call in which they
  agree to stop runs no step, calls no hook's `after_run`, and returns None
  for each fetch.

  Args:
    sess: The RawSession below.
    hooks: The hooks, in order.
    steps_per_loop: At most this many steps per run.
    profile_dir: The TensorBoard log directory under which a run traced by
      `RunOptions` (any `trace_level`, as v1) writes its TF2 profile.
  """

  def __init__(self, sess, hooks, steps_per_loop=1, profile_dir=''):
    super().__init__(sess)
    self._hooks = hooks
    self._traces = Traces(profile_dir)
    self._should_stop = False
    self._steps_per_loop = steps_per_loop
    self._schedule = None
    self._agreement = sess.agreement
    global_step = training_util.get_global_step()
    if self._agreement is not None and global_step is None:
      raise ValueError(
          'A multi-worker session needs a global step: its workers agree on '
          'how many steps a run takes and where it ends. Create it under the '
          'strategy\'s scope before the session, with '
          'tfmon.train.get_or_create_global_step(), and increment it in the step.')
    if global_step is not None and (
        steps_per_loop > 1 or self._agreement is not None or
        any(declares_schedule(h) for h in hooks)):
      self._schedule = ObservationSchedule(hooks, steps_per_loop, global_step)
    # The call count of the session below when the schedule last knew the
    # global step: if it moved on, calls we did not make (a hook's or
    # run_step_fn's own session.run, or a run that raised) may have changed it.
    self._calls_seen = None

  def _check_stop(self):
    return self._should_stop

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    raw_session.require_eager()  # before the hooks see a run that cannot happen
    if self.should_stop():
      raise RuntimeError('Run called even after should_stop requested.')
    run_context = SessionRunContext(
        original_args=SessionRunArgs(fetches, feed_dict), session=self._sess)
    options = options or tf.compat.v1.RunOptions()
    all_fetches = [fetches]
    result_index = {}  # hook -> its index in all_fetches
    schedule = self._schedule
    caller_leaves = None  # flattened once, only by a fusing session
    fusible = False  # whether this run can go through the fused loop
    if schedule is None:
      steps, hooks = 1, self._hooks
    else:
      # Only a fusing or multi-worker session needs to know whether this run
      # could go through the fused loop.
      if (schedule.fuses and not feed_dict) or self._agreement is not None:
        caller_leaves = tf.nest.flatten(fetches)
        fusible = self._sess.can_fuse(caller_leaves)
      if self._sess.calls_run != self._calls_seen:
        schedule.value = None  # plan() reads it anew
      steps, hooks = schedule.plan(fusible and not feed_dict)
      self._calls_seen = self._sess.calls_run
    feed_dict = self._call_hook_before_run(
        run_context, hooks, steps, all_fetches, result_index, feed_dict, options)
    run_metadata = run_metadata or tf.compat.v1.RunMetadata()
    traced = (options.trace_level > tf.compat.v1.RunOptions.NO_TRACE and
              self._traces.start('A run with RunOptions.trace_level'))
    try:
      outputs, global_step_after, steps = self._call(
          all_fetches, feed_dict, options, run_metadata, steps,
          len(caller_leaves) if fusible else None)
    except BaseException:
      if traced:
        discard_unfinished_trace()
      raise
    if traced:
      self._traces.stop()
      self._save_trace(global_step_after)
    if self._agreement is not None and self._agreement.agreed_stop:
      self._should_stop = True  # another worker stopped: no step ran
      return tf.nest.map_structure(lambda _: None, fetches)
    if schedule is not None:
      self._calls_seen = self._sess.calls_run
      # Hooks need not read it again (each separate TensorFlow call right after
      # a run costs ~0.4 ms on a 2-core machine).
      run_context.global_step_after = global_step_after
    missed = None
    if schedule is not None:
      run_context.steps_run = steps
      missed = schedule.missed or None  # hooks that missed runs: rare
    no_results = SessionRunValues(None, options, run_metadata)  # immutable, shared
    for hook in hooks:
      if missed is not None:
        run_context.steps_run = steps + missed.get(hook, 0)
      index = result_index.get(hook)
      hook.after_run(run_context, no_results if index is None else SessionRunValues(
          outputs[index], options, run_metadata))
    if schedule is not None:
      schedule.after_run(global_step_after, steps)
    self._should_stop = self._should_stop or run_context.stop_requested
    return outputs[0]

  def _call(self, all_fetches, feed_dict, options, run_metadata, steps,
            loop_leaves):
    """Makes the run's one call: `(outputs, global step after or None, steps)`.

    `loop_leaves` is how many leading flat leaves the fused loop runs, or None
    for a call of one step.
    """
    schedule = self._schedule
    if schedule is None:
      outputs = self._sess.run(all_fetches, feed_dict=feed_dict, options=options,
                               run_metadata=run_metadata)
      return outputs, None, steps
    if loop_leaves is not None and (not feed_dict or self._agreement is not None):
      # One step too: a fusing session's runs all share the fused function.
      # Fed runs (a FeedFnHook's, say) are single steps of their own, except
      # that a multi-worker session runs them through the loop too (one step).
      return self._sess.run_fused(
          all_fetches, loop_leaves, steps, min(schedule.target, _NO_TARGET),
          schedule.global_step, feed_dict)
    # The global step is counted when the call adds a known constant to it,
    # else read with the outputs: reading it every run costs ~10 µs. A run in
    # which hooks are due reads it anew, so what they act on (a checkpoint's
    # step) is the variable's value even if something outside runs changed it.
    known = self._sess.calls_run == self._calls_seen  # no before_run made calls
    outputs, global_step_after = self._sess.run_counting(
        all_fetches, feed_dict, schedule.global_step,
        schedule.value if known else None)
    if schedule.hooks_due or global_step_after is None:
      global_step_after = int(schedule.global_step.numpy())
    return outputs, global_step_after, steps

  def _save_trace(self, global_step_after):
    """Keeps the profile of the run just made, named by the step it reached."""
    if global_step_after is None:
      global_step = training_util.get_global_step()
      global_step_after = (self._sess.calls_run if global_step is None
                           else int(global_step.numpy()))
    run_dir = self._traces.save(global_step_after)
    logging.info(
        'Saved the TF2 profile of the run reaching step %d into %s (TensorBoard\'s '
        'Profile tab shows it; RunMetadata.step_stats stays empty in TF2).',
        global_step_after, run_dir)

  def _call_hook_before_run(self, run_context, hooks, steps, all_fetches,
                            result_index, user_feed_dict, options):
    hook_feeds = {}
    missed = None
    if self._schedule is not None:
      run_context.steps_run = steps
      missed = self._schedule.missed or None  # hooks that missed runs: rare
    for hook in hooks:
      if missed is not None:
        run_context.steps_run = steps + missed.get(hook, 0)
      request = checked_run_args(hook, hook.before_run(run_context))
      if request is None:
        continue
      if request.fetches is not None:
        result_index[hook] = len(all_fetches)
        all_fetches.append(request.fetches)
      if request.feed_dict:
        _raise_if_feeds_intersect(hook_feeds, request.feed_dict,
                                  'Same tensor is fed by two hooks.')
        hook_feeds.update(request.feed_dict)
      if request.options:
        _merge_run_options(options, request.options)
    if not hook_feeds:
      return user_feed_dict
    if not user_feed_dict:
      return hook_feeds
    _raise_if_feeds_intersect(user_feed_dict, hook_feeds,
                              'Same tensor is fed by a SessionRunHook and user.')
    hook_feeds.update(user_feed_dict)
    return hook_feeds


def checked_run_args(hook, request):
  """`request`, what `hook.before_run` returned, if a SessionRunArgs or None.

  Raises:
    TypeError: naming the hook and the value, for anything else.
  """
  if request is not None and not isinstance(request, SessionRunArgs):
    raise TypeError(
        f'{type(hook).__name__}.before_run returned {request!r}; it must return '
        'a SessionRunArgs or None.')
  return request


def _raise_if_feeds_intersect(feeds1, feeds2, message):
  intersection = set(feeds1.keys()) & set(feeds2.keys())
  if intersection:
    raise RuntimeError(message + ' Conflict(s): ' + str(list(intersection)))


def _merge_run_options(options, incoming_options):
  """Merges `incoming_options` into `options` by v1's rules (max or OR per field)."""
  options.trace_level = max(options.trace_level, incoming_options.trace_level)
  options.timeout_in_ms = max(options.timeout_in_ms, incoming_options.timeout_in_ms)
  options.inter_op_thread_pool = max(options.inter_op_thread_pool,
                                     incoming_options.inter_op_thread_pool)
  options.output_partition_graphs = max(options.output_partition_graphs,
                                        incoming_options.output_partition_graphs)
  options.debug_options.debug_tensor_watch_opts.extend(
      incoming_options.debug_options.debug_tensor_watch_opts)
  options.debug_options.reset_disk_byte_usage = (
      options.debug_options.reset_disk_byte_usage or
      incoming_options.debug_options.reset_disk_byte_usage)
  options.report_tensor_allocations_upon_oom = (
      options.report_tensor_allocations_upon_oom or
      incoming_options.report_tensor_allocations_upon_oom)
