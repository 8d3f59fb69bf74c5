"""TensorFlow's own `tf.compat.v1.train` hook objects, run in eager tfmon sessions.

A TF1 script ported to tfmon often keeps `tf.compat.v1.train.StopAtStepHook(...)`
and friends. Their `begin()` needs a TF1 graph (`Tensor.op is undefined when
eager execution is enabled`, `v1.summary.FileWriter is not compatible with eager
execution`), so a session replaces each one, before any `begin()`, by tfmon's hook
built with the same configuration; what tfmon cannot run (a graph tensor, a TF1
`Saver`) is refused with a message naming the tfmon replacement (SPEC section 7).

A user's subclass of one (overriding `after_run`, reading `self._timer`) runs
itself, as in TF1: its object is given a class between its own and TF's whose
`begin()` sets TF's private state to what a tfmon session runs (names,
variables and step functions as given, the global step variable, a
`tf.summary` writer), and whose other methods are TF's own (LoggingTensorHook's
`at_end` names excepted: see _EagerLoggingTensorHook). Subclasses of the hooks
whose machinery is a TF1 graph's (a `Saver`, a `FileWriter`'s summary ops, run
metadata) are refused, naming tfmon's class to subclass.

TensorFlow keeps the configuration in private attributes, set in each hook's
constructor (`tensorflow/python/training/basic_session_run_hooks.py`); this
module is the one place that reads them, one function per hook.
"""

import os

import tensorflow as tf

from tfmon import summaries
from tfmon import tf_internals
from tfmon import tf_logging as logging
from tfmon import training_util
from tfmon.hook_api import SessionRunArgs
from tfmon.hooks.checkpoint import CheckpointSaverHook
from tfmon.hooks.feeds import FeedFnHook
from tfmon.hooks.final_ops import FinalOpsHook
from tfmon.hooks.global_step_waiter import GlobalStepWaiterHook
from tfmon.hooks.nan import NanTensorHook
from tfmon.hooks.profiler import ProfilerHook
from tfmon.hooks.stop_at_step import StopAtStepHook
from tfmon.hooks.summary import StepCounterHook, SummarySaverHook
from tfmon.hooks.tensor_logging import LoggingTensorHook

_V1 = tf.compat.v1.train
_state = tf_internals.tf_state  # TF's own hooks' constructor arguments


class _Refused(TypeError):
  """What tfmon cannot take from a TF hook (a TF1 graph's object); the caller
  adds which hook it is."""


def _refuse_graph_tensors(fetches, what):
  for leaf in tf.nest.flatten(fetches):
    if isinstance(leaf, (tf.Operation,)) or tf.is_symbolic_tensor(leaf):
      name = leaf.name.split(':')[0]
      raise _Refused(
          f'{what} holds the graph tensor {leaf.name!r}, which tfmon cannot run: a '
          'tfmon session runs step functions, not a TF1 graph. Return the value '
          f"from your step function ({{'{name}': value}}) and give its name "
          f"instead ('{name}'), or give a tf.Variable or a function computing it.")


def _summary_writer(writer, what):
  if writer is None or isinstance(writer, tf.summary.SummaryWriter):
    return writer
  raise _Refused(
      f'{what} summary_writer={writer!r} is a TF1 FileWriter, which eager '
      'TensorFlow cannot use. Give output_dir (tfmon shares one tf.summary writer '
      'per directory) or a tf.summary.create_file_writer(dir).')


def _scaffold(scaffold, piece, what):
  """A tfmon Scaffold as is; a TF1 Scaffold whose `piece` is unset as None (what
  its default meant: the session's own summaries, or all variables)."""
  if not isinstance(scaffold, _V1.Scaffold):
    return scaffold  # None, or tfmon's (not a subclass of TF's)
  if _state(scaffold, '_' + piece) is None:
    return None
  raise _Refused(
      f"{what} has a tf.compat.v1.train.Scaffold with a TF1 {piece}, which "
      f"tfmon cannot run. Use tfmon.train.Scaffold({'checkpoint' if piece == 'saver' else piece}=...) "
      f"(see its docstring) or leave the scaffold out.")


def _stop_at_step(hook):
  last_step = _state(hook, '_last_step')
  if last_step is not None:  # given, or set by a session the hook already ran in
    return StopAtStepHook(last_step=last_step)
  return StopAtStepHook(num_steps=_state(hook, '_num_steps'))


def _logging_tensor(hook):
  tensors = _state(hook, '_tensors')
  tag_order = _state(hook, '_tag_order')
  _refuse_graph_tensors(list(tensors) + list(tensors.values()), 'its tensors')
  # Given a list, TF stored {item: item} and the list as the tag order.
  if all(tag is item for tag, item in tensors.items()) and list(tag_order) == list(tensors):
    tensors = list(tag_order)
  every_n_secs, every_n_iter = tf_internals.timer_arguments(_state(hook, '_timer'))
  return LoggingTensorHook(tensors, every_n_iter=every_n_iter, every_n_secs=every_n_secs,
                           at_end=_state(hook, '_log_at_end'), formatter=_state(hook, '_formatter'))


def _step_counter(hook):
  every_n_secs, every_n_steps = tf_internals.timer_arguments(_state(hook, '_timer'))
  return StepCounterHook(
      every_n_steps=every_n_steps, every_n_secs=every_n_secs,
      output_dir=_state(hook, '_output_dir'),
      summary_writer=_summary_writer(_state(hook, '_summary_writer'), 'it has'))


def _checkpoint_saver(hook):
  saver = _state(hook, '_saver')
  if isinstance(saver, _V1.Saver):
    raise _Refused(
        f'its saver is a TF1 Saver ({saver!r}), which saves a graph\'s variables '
        "by name. Pass what to save as tfmon does: checkpoint={'model': model, "
        "'optimizer': optimizer} on the session, or saver= that dict (or a "
        'tf.train.Checkpoint / CheckpointManager) on tfmon.train.CheckpointSaverHook.')
  every_secs, every_steps = tf_internals.timer_arguments(_state(hook, '_timer'))
  return CheckpointSaverHook(
      _state(hook, '_checkpoint_dir'),
      save_secs=every_secs, save_steps=every_steps, saver=saver,
      checkpoint_basename=os.path.basename(_state(hook, '_save_path')),
      scaffold=_scaffold(_state(hook, '_scaffold'), 'saver', 'it'),
      listeners=_state(hook, '_listeners'),
      save_graph_def=_state(hook, '_save_graph_def'))


def _summary_saver(hook):
  summary_op = _state(hook, '_summary_op')
  if summary_op is not None:
    ops = summary_op if isinstance(summary_op, (list, tuple)) else [summary_op]
    if not all(callable(op) for op in ops):
      raise _Refused(
          f'its summary_op {summary_op!r} is a TF1 summary tensor, which tfmon '
          'cannot run. Summaries are the tf.summary (or tf.compat.v1.summary) '
          'calls inside your step function, recorded on the hook\'s schedule: '
          'leave summary_op out, or give a function making extra summaries.')
  every_secs, every_steps = tf_internals.timer_arguments(_state(hook, '_timer'))
  return SummarySaverHook(
      save_steps=every_steps, save_secs=every_secs,
      output_dir=_state(hook, '_output_dir'),
      summary_writer=_summary_writer(_state(hook, '_summary_writer'), 'it has'),
      scaffold=_scaffold(_state(hook, '_scaffold'), 'summary_op', 'it'),
      summary_op=summary_op)


def _nan_tensor(hook):
  _refuse_graph_tensors(_state(hook, '_loss_tensor'), 'its loss_tensor')
  return NanTensorHook(_state(hook, '_loss_tensor'),
                       fail_on_nan_loss=_state(hook, '_fail_on_nan_loss'))


def _feed_fn(hook):
  return FeedFnHook(hook.feed_fn)


class _FinalOpsReportingToTF(FinalOpsHook):
  """tfmon's FinalOpsHook that also fills the TF hook's `final_ops_values`, which
  is what the program holding the TF hook reads after the session."""

  def __init__(self, tf_hook, final_ops, final_ops_feed_dict):
    super().__init__(final_ops, final_ops_feed_dict)
    self._tf_hook = tf_hook

  def end(self, session):
    super().end(session)
    tf_internals.set_tf_state(self._tf_hook, '_final_ops_values', self.final_ops_values)


def _final_ops(hook):
  _refuse_graph_tensors(_state(hook, '_final_ops'), 'its final_ops')
  return _FinalOpsReportingToTF(hook, _state(hook, '_final_ops'),
                                _state(hook, '_final_ops_feed_dict'))


def _global_step_waiter(hook):
  return GlobalStepWaiterHook(_state(hook, '_wait_until_step'))


def _profiler(hook):
  every_secs, every_steps = tf_internals.timer_arguments(_state(hook, '_timer'))
  return ProfilerHook(
      save_steps=every_steps, save_secs=every_secs,
      output_dir=os.path.dirname(_state(hook, '_output_file')),
      show_dataflow=_state(hook, '_show_dataflow'), show_memory=_state(hook, '_show_memory'))


# TF's class -> the function building tfmon's hook from an instance of it.
_CONVERSIONS = {
    _V1.StopAtStepHook: _stop_at_step,
    _V1.LoggingTensorHook: _logging_tensor,
    _V1.StepCounterHook: _step_counter,
    _V1.CheckpointSaverHook: _checkpoint_saver,
    _V1.SummarySaverHook: _summary_saver,
    _V1.NanTensorHook: _nan_tensor,
    _V1.FeedFnHook: _feed_fn,
    _V1.FinalOpsHook: _final_ops,
    _V1.GlobalStepWaiterHook: _global_step_waiter,
    _V1.ProfilerHook: _profiler,
}

def _holds_a_name(fetches):
  return any(isinstance(leaf, str) for leaf in tf.nest.flatten(fetches))


class _EagerLoggingTensorHook(_V1.LoggingTensorHook):
  """TF's LoggingTensorHook whose tensors are fetched as given.

  As tfmon's own LoggingTensorHook, names are fetched on every run when
  `at_end` (end() runs no step to resolve them) and end() logs their last
  values; variables and step functions are evaluated again in end().
  """

  def begin(self):
    self._timer.reset()
    self._iter_count = 0
    self._current_tensors = dict(self._tensors)
    self._named_at_end = {tag: fetches for tag, fetches in self._tensors.items()
                          if self._log_at_end and _holds_a_name(fetches)}
    self._last_named_values = None

  def before_run(self, run_context):
    run_args = super().before_run(run_context)
    if run_args is None and self._named_at_end:
      return SessionRunArgs(self._named_at_end)
    return run_args

  def after_run(self, run_context, run_values):
    if self._named_at_end and isinstance(run_values.results, dict):
      self._last_named_values = {tag: run_values.results[tag]
                                 for tag in self._named_at_end}
    super().after_run(run_context, run_values)

  def end(self, session):
    if not self._log_at_end:
      return
    if self._named_at_end and self._last_named_values is None:
      return  # no run: the names have no value
    values = dict(self._last_named_values or {})
    evaluated = {tag: fetches for tag, fetches in self._current_tensors.items()
                 if tag not in self._named_at_end}
    if evaluated:
      values.update(session.run(evaluated))
    self._log_tensors(values)


class _EagerStopAtStepHook(_V1.StopAtStepHook):
  """TF's StopAtStepHook reading the global step variable: fetched with a step,
  its value before the step, which is what TF's global-step read gave."""

  def begin(self):
    self._global_step_tensor = training_util.require_global_step('StopAtStepHook')


class _EagerGlobalStepWaiterHook(_V1.GlobalStepWaiterHook):
  """TF's GlobalStepWaiterHook reading the global step variable."""

  def begin(self):
    self._worker_is_started = False
    self._global_step_tensor = training_util.require_global_step('_GlobalStepWaiterHook')


class _SummaryWriter:
  """What TF's hooks call of a v1 FileWriter, writing to a `tf.summary` writer:
  v1 `Summary` protos as they are, flushed at once (tfmon's writers never
  flush by themselves, and a TF hook has no end() flushing them)."""

  def __init__(self, writer):
    self.writer = writer

  def add_summary(self, summary, global_step=None):
    if not isinstance(summary, bytes):
      summary = summary.SerializeToString()
    summaries.write_graph_summaries(self.writer, summary, global_step or 0)
    summaries.flush(self.writer)

  def flush(self):
    summaries.flush(self.writer)


class _EagerStepCounterHook(_V1.StepCounterHook):
  """TF's StepCounterHook reading the global step variable, writing its
  `global_step/sec` to a `tf.summary` writer."""

  def begin(self):
    writer = self._summary_writer
    if writer is None and self._output_dir:
      writer = summaries.writer_for(self._output_dir)
    if isinstance(writer, tf.summary.SummaryWriter):
      writer = _SummaryWriter(writer)
    self._summary_writer = writer
    global_step = training_util.require_global_step('StepCounterHook')
    self._global_step_tensor = global_step
    self._summary_tag = global_step.name.split(':')[0] + '/sec'  # TF1's op name


# TF's class -> the class between a subclass of it and it, running in eager
# tfmon sessions: its graph-bound methods replaced, the subclass's overrides kept.
_EAGER_BASES = {
    _V1.LoggingTensorHook: _EagerLoggingTensorHook,
    _V1.StopAtStepHook: _EagerStopAtStepHook,
    _V1.GlobalStepWaiterHook: _EagerGlobalStepWaiterHook,
    _V1.StepCounterHook: _EagerStepCounterHook,
}

# Subclasses of these run as they are: their methods need no TF1 graph and only
# `session.run` fetches, which tfmon resolves.
_SUBCLASSES_RUN_AS_IS = (_V1.FeedFnHook, _V1.FinalOpsHook, _V1.NanTensorHook)

_eager_classes = {}  # a user's subclass -> the class its objects run as


def _run_subclass(hook, tf_class):
  """`hook`, an instance of a subclass of `tf_class`, made to run in eager tfmon
  sessions: the object itself (the program holding it sees its state), its
  class now one deriving from its own and from `tf_class`'s eager base, which
  comes right after the subclass in the MRO, so `super().begin()` reaches it.

  Raises:
    _Refused: for a subclass of a hook whose machinery needs a TF1 graph, or a
      LoggingTensorHook holding graph tensors.
  """
  if isinstance(hook, _SUBCLASSES_RUN_AS_IS):
    return hook
  eager_base = _EAGER_BASES.get(tf_class)
  if eager_base is None:
    raise _Refused('its methods need a TF1 graph')
  if isinstance(hook, eager_base):
    return hook  # made eager by an earlier session
  if tf_class is _V1.LoggingTensorHook:
    tensors = _state(hook, '_tensors')
    _refuse_graph_tensors(list(tensors) + list(tensors.values()), 'its tensors')
  if tf_class is _V1.StepCounterHook:
    _summary_writer(_state(hook, '_summary_writer'), 'it has')
  cls = type(hook)
  try:
    eager_class = _eager_classes.get(cls)
    if eager_class is None:
      eager_class = _eager_classes[cls] = type(
          cls.__name__, (cls, eager_base),
          {'__module__': cls.__module__, '__qualname__': cls.__qualname__})
    hook.__class__ = eager_class
  except TypeError as e:  # an MRO or object layout conflict (__slots__)
    raise _Refused(f'its class cannot take tfmon\'s eager {tf_class.__name__} '
                   f'as a base ({e})') from None
  logging.info('Running %s, a subclass of tf.compat.v1.train.%s, as it is, its '
               'begin() made eager.', cls.__qualname__, tf_class.__name__)
  return hook


def as_tfmon_hook(hook, where):
  """Returns `hook`, or tfmon's hook for an instance of a TF built-in hook.

  Args:
    hook: A `SessionRunHook`.
    where: How the caller names it in messages, e.g. 'hooks[2]'.

  Returns:
    `hook` itself, unless it is an instance of one of `tf.compat.v1.train`'s
    built-in hooks: then tfmon's hook of the same name, with the same
    configuration.

  Raises:
    TypeError: for a TF built-in hook configured with what tfmon cannot run
      (graph tensors, a TF1 Saver or FileWriter) or a subclass of one whose
      methods need a TF1 graph; the message names the tfmon replacement.
    ValueError: for a configuration tfmon's hook refuses as a bad value.
  """
  cls = type(hook)
  convert = _CONVERSIONS.get(cls)
  if convert is None:
    for tf_class in _CONVERSIONS:
      if isinstance(hook, tf_class):
        try:
          return _run_subclass(hook, tf_class)
        except _Refused as e:
          name = tf_class.__name__
          raise TypeError(
              f'{where} is {hook!r}, a subclass of tf.compat.v1.train.{name}, but '
              f'{e}. Subclass tfmon.train.{name} instead: it takes the same '
              'arguments and runs in an eager tfmon session.') from None
    return hook
  name = cls.__name__
  try:
    converted = convert(hook)
  except (TypeError, ValueError) as e:  # _Refused is a TypeError
    error_type = TypeError if isinstance(e, TypeError) else ValueError
    raise error_type(
        f'{where} is tf.compat.v1.train.{name} {hook!r}, which a tfmon session '
        f'runs as tfmon.train.{name} with the same configuration, but {e} '
        f'(or pass tfmon.train.{name} yourself.)') from None
  logging.info('Running tf.compat.v1.train.%s as tfmon.train.%s with the same '
               'configuration.', name, name)
  return converted
