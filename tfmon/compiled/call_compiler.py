"""CallCompiler: every `run` of a session as one compiled call.

What a run can choose, and how each choice is made without tracing anew:
  - feed values: tensor inputs (a feed whose shape changes relaxes that
    dimension to None once, as tf.function's reduce_retracing does);
  - whether summaries record: a bool input, `tf.summary.record_if(record)`;
  - how many steps a fused run takes and the global step it must stop at: int
    inputs of the fused loop;
  - which hooks observe the run and what they fetch: not an input at all. The
    call structures of one family (the same step functions, feed keys, fusion
    and summary writer) share one CompiledCall, whose function computes the
    union of what its runs fetched (see compiled_call);
  - which hook callables run: part of the family (each is its own StepGraph).

A run's call structure (its flat leaves' keys, feed keys and fusion) is looked
up in one dict: a run seen before costs no classification, no trace and no
build.
"""

import atexit
import collections
import gc
import weakref

import tensorflow as tf

from tfmon import tf_internals
from tfmon import tf_logging as logging
from tfmon.compiled import alongside
from tfmon.compiled import fetch_plan
from tfmon.compiled.compiled_call import CompiledCall
from tfmon.compiled.step_graph import FeedDtypes, StepGraph


# Compilers of sessions not closed: released at exit, while tf.data's threads run.
_unreleased = weakref.WeakSet()


@atexit.register
def _release_all():
  """At exit, before the interpreter's teardown: releases what sessions not
  closed hold, and the graphs any code's custom gradients keep (Keras' own
  train function under a strategy's replica context is one), collected here
  so that their iterators are destroyed while tf.data still runs."""
  for compiler in list(_unreleased):
    compiler.release()
  if tf_internals.forget_custom_gradients(tf_internals.custom_gradient_names()):
    gc.collect()


class CallCompiler:
  """Runs fetches and feeds as one compiled call (see the module doc).

  Args:
    jit_compile: Compile step functions with XLA (see StepGraph).
    agreement: The WorkerAgreement of a multi-worker session, or None.
  """

  # This many distinct function objects of one name traced: likely one per run.
  RETRACE_WARNING_AFTER = 5

  def __init__(self, jit_compile=None, agreement=None):
    self._jit_compile = jit_compile
    self.agreement = agreement
    self._plans = {}     # call structure -> (FetchPlan, CompiledCall)
    self._families = {}  # family key -> CompiledCall
    self._step_graphs = {}  # (step key, summary writer id) -> StepGraph
    self._step_objects = collections.defaultdict(set)  # name -> leaf keys traced
    self._stop = None  # the fused loops' stop flag, made with the first of them
    self._variables = {}  # id -> every variable a traced step reads or writes
    self._variable_listeners = []
    self._alongside = []  # Pending work for the next compiled call
    self._feed_dtypes = FeedDtypes()
    self._custom_gradients = set()  # registered by its traces: see release()
    self._released_functions = 0
    _unreleased.add(self)

  def alongside_next_call(self, work):
    """Runs `work()` in a thread while the next compiled function runs.

    Started once that call's traces are done, just before TensorFlow runs it;
    the run waits for `work` and raises its exception, unless the call raised
    its own. See the `alongside` module.

    Returns:
      An alongside.Pending; its `result()` returns what `work` returned, and
      runs it in the caller's thread if no call has started it.
    """
    pending = alongside.Pending(work)
    self._alongside.append(pending)
    return pending

  def add_variable_listener(self, listener):
    """Calls `listener(variables)` with the variables step functions use.

    At once with those known, then with the new ones of each trace, before the
    traced step first runs: variables a TF1-style step creates in its first
    trace can be restored from a checkpoint before they are trained.
    """
    self._variable_listeners.append(listener)
    if self._variables:
      listener(list(self._variables.values()))

  @property
  def step_variables(self):
    """The variables traced step functions read or write, in the order met."""
    return list(self._variables.values())

  def _report_variables(self, traces, fetched=()):
    new = []
    used = [v for trace in traces for v in trace.variables]
    for variable in used + [v for v in fetched if isinstance(v, tf.Variable)]:
      if id(variable) not in self._variables:
        self._variables[id(variable)] = variable
        new.append(variable)
    if new:
      for listener in self._variable_listeners:
        listener(new)

  def stop_flag(self):
    """The bool variable fused loops read before each step (made on first use)."""
    if self._stop is None:
      with tf.init_scope():
        self._stop = tf.Variable(False, trainable=False, name='tfmon_stop_flag')
    return self._stop

  def request_stop_at_step_boundary(self):
    """Ends a running fused loop after its current step, and any later one at once.

    Safe to call from another thread while a run is in progress: the loop
    reads the flag before each step. A multi-worker session has no such flag:
    its workers agree to stop at the start of a call (WorkerAgreement).
    """
    if self.agreement is not None:
      return
    with tf.init_scope():  # eagerly, even if called while a trace is running
      self.stop_flag().assign(True)

  @property
  def stop_requested(self):
    return self._stop is not None and bool(self._stop.numpy())

  def set_jit_compile(self, jit_compile):
    """Compiles the step functions of calls traced from now on with XLA."""
    self._jit_compile = jit_compile
    self._plans, self._families, self._step_graphs = {}, {}, {}

  def release(self):
    """Drops every traced function, and what TensorFlow keeps of them for good.

    A closed session runs nothing more. TF's registry of custom gradients (a
    strategy's all-reduce is one) would otherwise keep each traced graph, and
    the tf.data iterators it captured, until the interpreter's teardown, where
    destroying them waited for tf.data's threads.
    """
    self._released_functions = self.functions_built
    self._plans, self._families, self._step_graphs = {}, {}, {}
    tf_internals.forget_custom_gradients(self._custom_gradients)
    self._custom_gradients.clear()
    _unreleased.discard(self)

  @property
  def functions_built(self):
    """How many compiled functions the calls so far have built (and run)."""
    return self._released_functions + sum(
        family.functions_built for family in self._families.values())

  def run(self, fetches, feed_dict=None):
    """Runs `fetches` with `feed_dict` in one compiled call.

    Args:
      fetches: A nest of fetch leaves (see FetchPlan).
      feed_dict: None or a dict from step-function parameter names to values.

    Returns:
      The results, numpy values in the structure of `fetches`.
    """
    flat = tf.nest.flatten(fetches)
    return fetch_plan.pack(fetches, self._call(flat, feed_dict, None, None))

  def run_counting(self, fetches, feed_dict, global_step, value_before):
    """Runs like `run`, and also returns the global step as the call left it.

    Args:
      fetches: A nest of fetch leaves (see FetchPlan).
      feed_dict: None or a dict from step-function parameter names to values.
      global_step: The global step variable.
      value_before: Its value before this call, or None if not known. When
        the call adds a known constant to the global step, the value after is
        counted rather than read (see step_increment).

    Returns:
      `(results, global_step_after)`.
    """
    flat = tf.nest.flatten(fetches)
    results, global_step_after = self._call(
        flat, feed_dict, None, global_step, value_before=value_before)
    return fetch_plan.pack(fetches, results), global_step_after

  def run_fused(self, fetches, loop_leaves, max_steps, target_global_step,
                global_step, feed_dict=None):
    """Runs the step functions of the first `loop_leaves` flat leaves in a loop.

    Args:
      fetches: A nest whose first `loop_leaves` flattened leaves are the
        caller's; the rest (hooks') are computed once, after the loop.
      loop_leaves: How many leading flat leaves form the looped step.
      max_steps: At most this many iterations.
      target_global_step: Stop once the global step reaches this.
      global_step: The global step variable.
      feed_dict: Feeds, the same for every step (a multi-worker session runs
        fed steps through the loop too, one at a time).

    Returns:
      `(results, global_step_after, steps_run)`.
    """
    flat = tf.nest.flatten(fetches)
    results, global_step_after, steps_run = self._call(
        flat, feed_dict, loop_leaves, global_step,
        loop=(max_steps, target_global_step))
    return fetch_plan.pack(fetches, results), global_step_after, steps_run

  def _call(self, flat, feed_dict, loop_leaves, global_step, **call_args):
    feed_keys = tuple(feed_dict) if feed_dict else ()
    key = (tuple(map(fetch_plan.leaf_key, flat)), feed_keys, loop_leaves,
           global_step is not None)
    cached = self._plans.get(key)
    if cached is not None:
      plan, family = cached
      return family(plan, flat, feed_dict, **call_args)
    plan = fetch_plan.FetchPlan(flat, feed_keys, loop_leaves)
    family = self._family(plan, global_step)
    self._warn_if_steps_are_new_objects(plan)
    union = family.require(plan)
    try:
      with tf_internals.custom_gradients_registered(self._custom_gradients):
        output = family(plan, flat, feed_dict, **call_args)
    except Exception:
      if union is not None and not family.built():
        family.restore(union)  # a failed trace is not kept: the next run retries
      raise
    self._plans[key] = plan, family
    return output

  def _family(self, plan, global_step):
    """The CompiledCall of `plan`'s family, made on first use."""
    summaries = plan.summaries
    writer_key = None
    if summaries is not None:
      writer_key = (id(summaries.writer), id(summaries.global_step))
    key = (tuple(plan.step_keys), plan.loop_step_count, plan.feed_keys, writer_key,
           None if global_step is None else id(global_step))
    family = self._families.get(key)
    if family is None:
      steps = [self._step_graph(k, fn, summaries)
               for k, fn in zip(plan.step_keys, plan.steps)]
      _check_feeds(steps, plan.feed_keys)
      fused = plan.loop_step_count is not None
      agreement = self.agreement if fused else None
      family = CompiledCall(
          steps, plan.loop_step_count, plan.feed_keys, summaries, global_step,
          self.stop_flag() if fused and agreement is None else None,
          self._report_variables, agreement, self._alongside,
          known_variables=lambda: self.step_variables, feed_dtypes=self._feed_dtypes)
      self._families[key] = family
    return family

  def _step_graph(self, key, fn, summaries):
    writer = summary_step = None
    if summaries is not None:
      writer, summary_step = summaries.writer, summaries.global_step
    graph_key = (key, id(writer), id(summary_step))
    step = self._step_graphs.get(graph_key)
    if step is None:
      step = self._step_graphs[graph_key] = StepGraph(
          fn, self._jit_compile, writer, summary_step)
    return step

  def _warn_if_steps_are_new_objects(self, plan):
    """Warns once per name when step functions of one name keep being new objects.

    A step function made anew for every run (`op(lambda: ...)` or a closure
    defined inside the training loop) is a new call structure every run, so every
    run traces again: tens of milliseconds instead of microseconds.
    """
    for key, fn in zip(plan.step_keys, plan.steps):
      name = fetch_plan.describe(fn)
      seen = self._step_objects[name]
      seen.add(key)
      if len(seen) == self.RETRACE_WARNING_AFTER:
        logging.warning(
            'run() has traced %d different step functions named %s: a step '
            'function created anew for every run (op(lambda: ...) or a function '
            'defined inside the training loop) makes every run trace again. '
            'Create it once, before the loop.', len(seen), name)


def _check_feeds(steps, feed_keys):
  """Raises ValueError for a required parameter unfed or a feed no step takes."""
  accepted = set()
  for step in steps:
    step.check_feeds(feed_keys)
    accepted.update(step.parameters)
  if any(step.takes_all_feeds for step in steps):
    return
  for key in feed_keys:
    if key not in accepted:
      parameters = {s.name: s.parameters for s in steps}
      raise ValueError(
          f'feed_dict key {key!r} matches no parameter of the step functions in '
          f'this call (parameters: {parameters or "no step function is fetched"}). '
          'Feed keys name step-function parameters: rename the key or add the '
          'parameter.')
