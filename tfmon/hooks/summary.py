"""SummarySaverHook and StepCounterHook: TensorBoard event files via tf.summary."""

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import arg_checks
from tfmon import training_util
from tfmon import summaries
from tfmon.compiled import graph_capture
from tfmon.compiled import meta_graph
from tfmon.compiled.fetch_plan import RecordSummaries, op
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger


def _writer(summary_writer, output_dir, hook_name):
  if summary_writer is not None:
    if not isinstance(summary_writer, tf.summary.SummaryWriter):
      raise TypeError(f'{hook_name} summary_writer must be a tf.summary.SummaryWriter '
                      f'(tf.summary.create_file_writer(dir)); got {summary_writer!r}.')
    return summary_writer
  if output_dir:
    return summaries.writer_for(output_dir, f'{hook_name} output_dir')
  return None


class SummarySaverHook(SessionRunHook):
  """Records the steps' `tf.summary` calls every N steps or seconds.

  In fused runs (`steps_per_loop`), the hook sees every run, runs end at its
  trigger steps, and only the last step of a run records.

  The summaries are the `tf.summary.*` calls made inside step functions, plus
  `summary_op` (a callable or list of callables, or the scaffold's). The session
  traces its calls once under this hook's writer with `tf.summary.record_if` fed
  true only on trigger runs: no retrace, and non-trigger runs skip the summary ops.
  As v1, the first run records, then the timer decides, and summaries carry the
  post-step global step. The first call's graph is written for TensorBoard,
  once per directory: a resumed job's session does not write it again. As
  v1, each session starts with a `SessionLog.START` event at its first step, so
  TensorBoard drops what an earlier run of the job wrote from there on (a job
  killed after its last checkpoint redoes those steps when resumed).

  Args:
    save_steps: Save every N steps.
    save_secs: Save every N seconds.
    output_dir: Directory for the event files (one writer per directory is shared).
    summary_writer: A `tf.summary.SummaryWriter`, instead of `output_dir`.
    scaffold: A `Scaffold` whose `summary_op` is recorded too.
    summary_op: A callable or list of callables with extra `tf.summary` calls,
      run after the caller's steps on trigger runs only.

  Raises:
    ValueError: both `scaffold` and `summary_op`; neither `output_dir` nor
      `summary_writer`; not exactly one of `save_steps` and `save_secs`.
  """

  # Called on every run (its RecordSummaries fetch keeps one trace), fused or not.
  observes_fused_runs = True

  def __init__(self, save_steps=None, save_secs=None, output_dir=None,
               summary_writer=None, scaffold=None, summary_op=None):
    if scaffold is not None and summary_op is not None:
      raise ValueError('Exactly one of scaffold or summary_op must be provided.')
    if output_dir is None and summary_writer is None:
      raise ValueError('SummarySaverHook needs output_dir or summary_writer: where '
                       'should the summaries go?')
    arg_checks.check_count(save_steps, 'save_steps')
    arg_checks.check_seconds(save_secs, 'save_secs')
    # A captured TF1 graph's summary op (a string tensor), else callables.
    self._graph_summary_op = summary_op if _is_graph_tensor(summary_op) else None
    self._summary_ops = [] if self._graph_summary_op is not None else (
        summaries.summary_ops(summary_op))
    self._scaffold = scaffold
    self._writer = _writer(summary_writer, output_dir, 'SummarySaverHook')
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=save_secs, every_steps=save_steps)
    self._save_steps = save_steps

  def begin(self):
    self._global_step_tensor = training_util.require_global_step('SummarySaverHook')
    self._next_step = None
    self._write_graph = True  # after_create_session tells if the directory has it
    self._timer.reset()
    if self._scaffold is not None:
      self._summary_ops = self._scaffold.summary_ops
    self._summary_op_fetches = [op(fn) for fn in self._summary_ops]
    self._graph = graph_capture.current()
    if self._graph is not None and self._graph_summary_op is None:
      # TF1's default: every v1 summary the graph holds, merged.
      with self._graph.as_default():
        self._graph_summary_op = tf.compat.v1.summary.merge_all()

  def after_create_session(self, session, coord):
    start_step = int(session.run(self._global_step_tensor))
    # v1 wrote it after its first run, before that run's summaries, which it
    # wrote itself; here the run writes them, so the start goes first.
    summaries.write_session_start(self._writer, start_step + 1)
    # Once per directory: a resumed job's first session wrote it (v1 wrote it
    # at every start, and TensorBoard warned of more than one graph).
    self._write_graph = not summaries.graph_written(self._writer,
                                                    resumed=start_step > 0)

  def steps_until_observed(self, global_step):
    if self._next_step is None:
      return 1
    return steps_until_trigger(self._timer, self._save_steps, global_step)

  def before_run(self, run_context):
    # The step this run ends at: one past the last seen, or more in a fused run.
    steps = getattr(run_context, 'steps_run', 1)
    self._request_summary = not summaries.failed(self._writer) and (
        self._next_step is None or
        self._timer.should_trigger_for_step(self._next_step + steps - 1))
    if self._graph is not None:
      # A captured graph's summaries are a fetch of their own: computed on
      # recording runs only, as TF1 computed them.
      if self._request_summary and self._graph_summary_op is not None:
        return SessionRunArgs({'graph_summary': self._graph_summary_op})
      return None
    # No 'global_step' fetch, unlike v1's: the session gives the value the run
    # left (global_step_after_run), and an output costs every run ~5 µs.
    requests = {
        'summaries': RecordSummaries(self._writer, self._request_summary,
                                     self._global_step_tensor,
                                     write_graph=self._first_graph_run()),
    }
    if self._request_summary and self._summary_op_fetches:
      requests['summary_op'] = self._summary_op_fetches
    return SessionRunArgs(requests)

  def after_run(self, run_context, run_values):
    global_step = training_util.global_step_after_run(
        run_context, self._global_step_tensor)
    if self._first_graph_run():
      summaries.wrote_graph(self._writer)
    if self._request_summary:
      self._timer.update_last_triggered_step(global_step)
      if self._graph is not None:
        first = self._first_graph_run()
        summaries.write_graph_summaries(
            self._writer, run_values.results and run_values.results['graph_summary'],
            global_step, self._graph if first else None,
            meta_graph.serialized_or_none(self._graph) if first else None)
      summaries.flush(self._writer)  # a failure is logged once; training goes on
    self._next_step = global_step + 1

  def end(self, session):
    summaries.flush(self._writer)

  def _first_graph_run(self):
    """Whether this run writes the graph: the session's first, unless written."""
    return self._next_step is None and self._write_graph


def _is_graph_tensor(value):
  return isinstance(value, tf.Tensor) and tf.is_symbolic_tensor(value)


class StepCounterHook(SessionRunHook):
  """Logs and records `global_step/sec` every N steps or seconds, as v1's.

  Also warns (five times at most) when the global step does not increase. The
  rate is logged and written on the trigger step itself, as a v1 `Summary`
  with a `simple_value` (what v1 wrote), so TF1-era readers of event files see it.

  Args:
    every_n_steps: Count every N steps.
    every_n_secs: Count every N seconds.
    output_dir: Directory for the `global_step/sec` scalar.
    summary_writer: A `tf.summary.SummaryWriter`, instead of `output_dir`.

  Raises:
    ValueError: not exactly one of `every_n_steps` and `every_n_secs`.
  """

  def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None,
               summary_writer=None):
    if (every_n_steps is None) == (every_n_secs is None):
      raise ValueError(
          'exactly one of every_n_steps and every_n_secs should be provided.')
    arg_checks.check_count(every_n_steps, 'every_n_steps')
    arg_checks.check_seconds(every_n_secs, 'every_n_secs')
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_steps=every_n_steps, every_secs=every_n_secs)
    self._every_n_steps = every_n_steps
    # TF's names, which subclasses written against TF's class read and set.
    self._summary_writer = _writer(summary_writer, output_dir, 'StepCounterHook')
    self._steps_per_run = 1

  def _set_steps_per_run(self, steps_per_run):
    """As TF's: how far the global step moves in a run, so a run that may reach
    the timer's next step reads the step it left (TPUEstimator sets it)."""
    self._steps_per_run = steps_per_run

  def begin(self):
    self._global_step_tensor = training_util.require_global_step('StepCounterHook')
    # Estimator's tag, whatever the variable is called (under Keras fit, the
    # optimizer's iteration count serves as the global step).
    self._summary_tag = 'global_step/sec'
    self._last_global_step = None
    self._seen_increase = False
    self._timer.reset()

  def steps_until_observed(self, global_step):
    # Watch every run until the global step is seen to move, to warn as v1 if not.
    if not self._seen_increase:
      return 1
    return steps_until_trigger(self._timer, self._every_n_steps, global_step)

  def before_run(self, run_context):
    return SessionRunArgs(self._global_step_tensor)

  def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
    steps_per_sec = elapsed_steps / elapsed_time
    if self._summary_writer is not None:
      summaries.write_simple_values(
          self._summary_writer, {self._summary_tag: steps_per_sec}, global_step)
    logging.info('%s: %g', self._summary_tag, steps_per_sec)

  def after_run(self, run_context, run_values):
    stale_global_step = int(run_values.results)
    if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
      global_step = training_util.global_step_after_run(
          run_context, self._global_step_tensor)
      if self._timer.should_trigger_for_step(global_step):
        elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(
            global_step)
        if elapsed_time is not None:
          self._log_and_record(elapsed_steps, elapsed_time, global_step)
    # Compare with the value seen last run rather than the timer's step, which
    # may hold another reading.
    if stale_global_step == self._last_global_step:
      logging.log_first_n(
          logging.WARNING,
          'It seems that global step (tf.train.get_global_step) has not been '
          'increased. Current value (could be stable): %s vs previous value: %s. '
          'You could increase the global step by calling '
          'global_step.assign_add(1) in your step function.', 5,
          stale_global_step, self._last_global_step)
    if self._last_global_step is not None and stale_global_step > self._last_global_step:
      self._seen_increase = True
    self._last_global_step = stale_global_step

  def end(self, session):
    if self._summary_writer is not None:
      summaries.flush(self._summary_writer)
