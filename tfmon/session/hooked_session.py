"""HookedSession: merges every hook's SessionRunArgs into the caller's run."""

import tensorflow as tf

from tfmon.hook_api import SessionRunArgs, SessionRunContext, SessionRunValues
from tfmon.session.wrapped_session import WrappedSession


class HookedSession(WrappedSession):
  """Calls `before_run` of every hook, runs once, then calls `after_run`.

  The caller's fetches and the fetches of every hook that asked for something
  this step go down as one list, `[caller_fetches, hook_fetches, ...]`, so the
  layer below runs them in one compiled call: the caller's step functions first,
  then the hooks' in hook order. A hook that fetches nothing adds nothing.

  Args:
    sess: The RawSession below.
    hooks: The hooks, in order.
  """

  def __init__(self, sess, hooks):
    super().__init__(sess)
    self._hooks = hooks
    self._should_stop = False

  def _check_stop(self):
    return self._should_stop

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    if self.should_stop():
      raise RuntimeError('Run called even after should_stop requested.')
    run_context = SessionRunContext(
        original_args=SessionRunArgs(fetches, feed_dict), session=self._sess)
    options = options or tf.compat.v1.RunOptions()
    all_fetches = [fetches]
    result_index = {}  # hook -> its index in all_fetches
    feed_dict = self._call_hook_before_run(
        run_context, all_fetches, result_index, feed_dict, options)
    run_metadata = run_metadata or tf.compat.v1.RunMetadata()
    outputs = self._sess.run(
        all_fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
    for hook in self._hooks:
      index = result_index.get(hook)
      hook.after_run(
          run_context,
          SessionRunValues(
              results=None if index is None else outputs[index],
              options=options,
              run_metadata=run_metadata))
    self._should_stop = self._should_stop or run_context.stop_requested
    return outputs[0]

  def _call_hook_before_run(self, run_context, all_fetches, result_index,
                            user_feed_dict, options):
    hook_feeds = {}
    for hook in self._hooks:
      request = hook.before_run(run_context)
      if request is None:
        continue
      if not isinstance(request, SessionRunArgs):
        raise TypeError(
            f'{type(hook).__name__}.before_run returned {request!r}; it must return '
            'a SessionRunArgs or None.')
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
