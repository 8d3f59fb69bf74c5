"""RawSession: the session below the hooks, tfmon's stand-in for tf.compat.v1.Session."""

import tensorflow as tf

from tfmon import tf_internals
from tfmon import workers
from tfmon.compiled import CallCompiler
from tfmon.compiled import fetch_plan
from tfmon.compiled import graph_capture
from tfmon.compiled import graph_call
from tfmon.compiled.worker_agreement import WorkerAgreement
from tfmon.session import graph_mode


def require_eager():
  """Raises unless running eagerly: runs are compiled calls made from Python."""
  if not tf.executing_eagerly():
    graph_capture.require_eager_runtime()  # the cause may be the process's
    raise RuntimeError(
        'A tfmon session runs eagerly: call run() from Python, not inside a '
        'tf.function or a tf.compat.v1 graph. The session compiles the step for you.')


class RawSession(tf_internals.SessionInterface):
  """Runs fetches (section 2 of SPEC.md) as one compiled call, without hooks.

  This is what hooks receive as `session` in `after_create_session`,
  `run_context.session` and `end`, and what `SingularMonitoredSession.raw_session()`
  returns.

  Created in the scope of a multi-worker strategy, its fused runs agree with
  the other workers (see `agreement`).

  Args:
    runs_steps: Whether the training steps are this session's runs; not so
      under Keras fit, where the model's train function runs them.
  """

  def __init__(self, runs_steps=True):
    self.runs_steps = runs_steps
    strategy = workers.current()
    # The other workers' agreement, made in every fused call; None in one process.
    self.agreement = WorkerAgreement(strategy) if strategy else None
    self._compiler = CallCompiler(agreement=self.agreement)
    # Made inside `with tfmon.Graph().as_default():`, it runs that graph's
    # elements (GraphCall); step functions still go to the compiler.
    graph = graph_capture.current()
    self._graph_call = (graph_call.GraphCall(graph, self._compiler.stop_flag)
                        if graph is not None else None)
    self._last_fused = None  # a multi-worker session's last fused call's args
    self._restore_jit = None  # restores XLA auto-clustering's setting at close
    # The checkpoint its creator restored, or None.
    self.restored_from = None
    self._closed = False
    # Compiled calls made so far: a session counting the global step (see
    # run_counting) learns from it that calls it did not make ran in between.
    self.calls_run = 0

  @property
  def graph(self):
    """The captured TF1 graph this session runs, or None (`session.graph`)."""
    return self._graph_call.graph if self._graph_call is not None else None

  def seed_graph_fetches(self, tensors):
    """Graph tensors later runs may fetch (see GraphCall.seed)."""
    self._graph_call.seed(tensors)

  @property
  def sess_str(self):
    return ''  # tf.compat.v1.Session's target: a tfmon session runs in process

  @property
  def compiled_functions(self):
    """How many TensorFlow functions this session's runs have built and run."""
    graph_functions = self._graph_call.functions_built if self._graph_call else 0
    return self._compiler.functions_built + graph_functions

  @property
  def step_variables(self):
    """The variables the step functions traced so far read or write, and a
    captured graph's global variables."""
    if self._graph_call is not None:
      return self._graph_call.graph.global_variables() + self._compiler.step_variables
    return self._compiler.step_variables

  def add_variable_listener(self, listener):
    """Calls `listener(variables)` with the variables step functions use: those
    known now, then the new ones of each trace, before the traced step runs.
    A captured graph's global variables are known at once (TF1's Saver's)."""
    if self._graph_call is not None:
      listener(self._graph_call.graph.global_variables())
    self._compiler.add_variable_listener(listener)

  def alongside_next_call(self, work):
    """Runs `work()` in a thread while TensorFlow runs this session's next call.

    Python is idle there: the first call of a big model's step spends seconds
    in TensorFlow's graph optimization (ResNet-50 on 2 cores: ~3 s), so work
    such as tracing another function is free, where before the run it would
    delay training. The run waits for `work`, and raises its exception unless
    the call raised one of its own.

    Args:
      work: A callable without arguments. It runs in another thread, outside
        the caller's thread-local scopes (`tf.device`, a strategy's scope).

    Returns:
      A Pending, whose `result()` returns what `work` returned (running it in
      the caller's thread if no call has started it) or raises what it raised.
    """
    return self._compiler.alongside_next_call(work)

  def request_stop_at_step_boundary(self):
    """Makes a fused run in progress end after its current step, and later ones
    after their first: what a graceful stop on a signal needs. Thread-safe."""
    self._compiler.request_stop_at_step_boundary()

  def can_fuse(self, leaves):
    """Whether a run of these flat fetch leaves can go through a fused loop: it
    runs a step function, or (on a captured graph) graph elements."""
    if self._graph_call is not None and self._graph_call.can_fuse(leaves):
      return True
    return any(fetch_plan.leaf_kind(leaf) in (fetch_plan.STEP, fetch_plan.OP)
               for leaf in leaves)

  @property
  def stop_requested(self):
    """Whether request_stop_at_step_boundary was called (a signal, say)."""
    return self._compiler.stop_requested

  def set_jit_compile(self, jit_compile):
    """Compiles the step functions of calls traced from now on with XLA; on a
    captured graph, XLA auto-clusters its functions until the session closes,
    as TF1's `global_jit_level=ON_1` did (graph_mode.autoclustering)."""
    if self._graph_call is None:
      self._compiler.set_jit_compile(jit_compile)
    elif jit_compile and self._restore_jit is None:
      self._restore_jit = graph_mode.autoclustering()

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """Runs `fetches` with `feed_dict` in one compiled call.

    Args:
      fetches: A nest of step functions, `op(fn)`s, variables, names, values or None.
      feed_dict: A dict from step-function parameter names to values, or None.
      options: A `tf.compat.v1.RunOptions`, accepted for compatibility.
      run_metadata: A `tf.compat.v1.RunMetadata`, accepted for compatibility.

    Returns:
      Numpy results in the structure of `fetches`.

    Raises:
      RuntimeError: if the session is closed or `run` is called inside a tf.function.
    """
    del options, run_metadata  # accepted for v1 compatibility
    self._check_open()
    if self._graph_call is not None:
      results = self._run_graph(fetches, feed_dict)
      if results is not graph_call.STEP_FUNCTIONS:
        return results
    require_eager()  # HookedSession.run checked too, but hooks and steps call this
    if not feed_dict and fetch_plan.leaf_kind(fetches) == fetch_plan.VARIABLE:
      # v1 hooks read the global step this way after runs: an eager read is a
      # tenth of the cost of a compiled call, and gives the same value.
      return fetches.numpy()
    self.calls_run += 1
    return self._compiler.run(fetches, feed_dict)

  def make_callable(self, fetches, feed_list=None, accept_options=False):
    """A callable running `fetches` with `feed_list`'s values fed, as TF1's."""
    feed_list = list(feed_list or ())

    def call(*feed_args, **kwargs):
      if len(feed_args) != len(feed_list):
        raise TypeError(f'The callable takes {len(feed_list)} feed values, got '
                        f'{len(feed_args)}.')
      if kwargs and not accept_options:
        raise TypeError(f'Unexpected arguments {sorted(kwargs)}: make the callable '
                        'with accept_options=True to pass options and run_metadata.')
      return self.run(fetches, dict(zip(feed_list, feed_args)), **kwargs)
    return call

  def _run_graph(self, fetches, feed_dict):
    """Runs `fetches` on the captured graph, or returns STEP_FUNCTIONS for a run
    of step functions only (the compiler's). A run of both (a tfmon hook's step
    function fetched with a graph training run) makes two calls: the graph's
    part, then the step functions'."""
    with graph_capture.running(self._graph_call.graph):
      results = self._graph_call.run(fetches, feed_dict)
      if results is graph_call.STEP_FUNCTIONS:
        return results
      self.calls_run += 1
      if isinstance(results, graph_call.Mixed):
        graph_part, step_part, merge = results.split(fetches, feed_dict)
        self.calls_run += 1
        results = merge(self._graph_call.run(*graph_part), self._compiler.run(*step_part))
      return results

  def run_counting(self, fetches, feed_dict, global_step, value_before):
    """Runs like `run`, and returns `(results, global_step_after)`.

    `value_before` is the global step before the call, or None if not known;
    see CallCompiler.run_counting. A run of a captured graph counts nothing:
    its global step after is None, for the caller to read.
    """
    self._check_open()  # HookedSession.run, the caller, required eager
    if self._graph_call is not None:
      results = self._run_graph(fetches, feed_dict)
      if results is not graph_call.STEP_FUNCTIONS:
        return results, None
    self.calls_run += 1
    return self._compiler.run_counting(fetches, feed_dict, global_step,
                                       value_before)

  def run_fused(self, fetches, loop_leaves, max_steps, target_global_step,
                global_step, feed_dict=None):
    """Runs up to `max_steps` steps in one compiled call (see CallCompiler.run_fused)."""
    self._check_open()
    self.calls_run += 1
    if self._graph_call is not None and self._graph_call.can_fuse(
        fetch_plan.flatten(fetches)[:loop_leaves]):
      if self.agreement is not None:  # its call first (WorkerAgreement)
        stop, max_steps, target_global_step = self.agreement.call(
            max_steps, target_global_step)
        if stop:
          return None, int(global_step.numpy()), 0
      # All but the last step in the graph's loop; the last, with every fetch
      # (hooks' included), is an ordinary run, so hooks see what it computed.
      # A fed run (multi-worker sessions fuse those too) is that one step.
      steps_run = self._graph_call.run_loop(fetches, loop_leaves, max_steps,
                                            target_global_step, global_step)
      results = self._run_graph(fetches, feed_dict)
      return results, int(global_step.numpy()), steps_run + 1
    if self.agreement is not None:
      self._last_fused = (fetches, loop_leaves, max_steps, target_global_step,
                          global_step, feed_dict)
    return self._compiler.run_fused(fetches, loop_leaves, max_steps,
                                    target_global_step, global_step, feed_dict)

  def agree_to_stop(self, code):
    """Tells the other workers that this one stops (multi-worker only).

    Makes one call that runs no step: the last fused call again, with the
    same collective ops as the others' next call, or before any (and on a
    captured graph, whose runs open with it), a call holding only the
    agreement. Every worker then stops after the same step.
    Does nothing once the workers agreed to stop, or in one process.

    Args:
      code: 1 for a stop a hook or the coordinator asked for, else the number
        of the signal that stops this worker.
    """
    agreement = self.agreement
    if agreement is None or agreement.agreed_stop or self._closed:
      return
    agreement.wanted_stop = code
    if self._last_fused is None:  # no fused call yet, or a captured graph's runs
      agreement.barrier(code)
    else:
      self.calls_run += 1
      self._compiler.run_fused(*self._last_fused)

  def _check_open(self):
    if self._closed:
      raise RuntimeError('Attempted to use a closed Session.')

  def close(self):
    self._closed = True
    if self._restore_jit is not None:
      self._restore_jit()
      self._restore_jit = None
    self._compiler.release()
    if self._graph_call is not None:
      self._graph_call.close()
