"""CompiledCall: the one compiled function of a family of runs.

A family is the call structures that share step functions, feed keys, fusion
and summary writer (CallCompiler sorts runs into families; see call_compiler
for what a run can choose). Its compiled function computes the union of every
name, variable and stop condition its runs have fetched so far; a run converts
to numpy only the outputs it fetched (~2 µs an output). A fetch outside the
union grows it, building a new compiled function of the same traced steps.

Each step function's Python body is traced once per feed signature (StepGraph)
and called from the compiled function, where TensorFlow inlines it. So a
session pays a step's trace once, and its graph optimization once per family
and feed signature: one function in steady training (BUILD_NOTES.md). A call
of one step whose fetches are all among the step's outputs runs the step's own
function: calling it from another would cost a second trace and TensorFlow's
inlining at the first call (ResNet-50: ~0.5 s of its start).

A session that fuses steps (`steps_per_loop` > 1) runs every step through the
fused loop, one step included; one that does not makes plain calls: a
one-iteration `tf.while_loop` costs a small model ~50 µs a call, and a `tf.cond`
~45 µs, so the unfused call holds no control flow at all.
"""

import difflib
import functools

import numpy as np
import tensorflow as tf

from tfmon import tf_internals
from tfmon.compiled import alongside
from tfmon.compiled import fetch_plan
from tfmon.compiled.step_graph import FeedDtypes

# Layout code: the counted global step's value before the call, known in Python.
_GLOBAL_STEP_BEFORE = -3


def _feed_tensor(key, value):
  if isinstance(value, tf.Tensor):
    if tf.is_symbolic_tensor(value):
      raise TypeError(f'feed_dict[{key!r}] is a graph tensor ({value!r}); feed '
                      'numpy arrays, Python numbers or eager tensors.')
    return value
  try:
    return tf.convert_to_tensor(value)
  except (TypeError, ValueError) as e:
    raise TypeError(
        f'feed_dict[{key!r}] = {value!r} cannot be converted to a tensor ({e}). '
        'Feed numpy arrays, Python numbers or tensors.') from None


def _value_to_numpy(value):
  return value.numpy() if isinstance(value, tf.Tensor) else np.asarray(value)


@functools.lru_cache(maxsize=None, typed=True)  # typed: True is not 1
def _constant_input(value, dtype=None):
  """A call input of one value (`record`, a stamp offset), made once: a new input
  tensor every call costs a small step ~25 µs. Made on first use, not at
  import, which would initialize TensorFlow before the caller could configure
  devices."""
  return tf.constant(value, dtype)


class _Compiled:
  """One traced function of a CompiledCall, for one feed signature.

  `call(tensors)` runs it on the call's inputs: its feeds, then `record` with a
  summary writer, then a fused loop's bounds.
  """

  def __init__(self, call, slots, increment, global_step_index, graph_to_write,
               named_variables=None):
    self.call = call
    self.graph_to_write = graph_to_write  # what TensorBoard's Graphs tab shows
    self._slots = slots  # (VARIABLE, id) / (STEP, i) / (NAME, name) -> output entry
    # Fetched names that name variables: fetched as the variables are.
    self._named_variables = named_variables or {}
    # What a call adds to the global step when known (else None), and where the
    # call returns the global step after it (None if it does not).
    self.increment = increment
    self.global_step_index = global_step_index
    self.layouts = {}  # FetchPlan -> per leaf: an output entry or a layout code

  def layout(self, plan, counted_global_step):
    layout = self.layouts.get(plan)
    if layout is None:
      layout = []
      for entry in plan.layout:
        if isinstance(entry, int):
          layout.append(entry)
          continue
        if entry[0] == fetch_plan.NAME and entry[1] in self._named_variables:
          entry = (fetch_plan.VARIABLE, self._named_variables[entry[1]])
        if entry[0] == fetch_plan.VARIABLE:
          layout.append(_GLOBAL_STEP_BEFORE if entry[1] is counted_global_step
                        else self._slots[fetch_plan.VARIABLE, id(entry[1])])
        else:
          layout.append(self._slots[entry])
      self.layouts[plan] = layout
    return layout


def _output_entry(nest, indices):
  """How to rebuild `nest` (tensors and Nones) from the outputs at `indices`."""
  if isinstance(nest, tf.Tensor):
    return indices[0]
  return (nest, [t is not None for t in tf.nest.flatten(nest)], indices)


def _zeros(spec):
  """A tensor to start a loop variable of `spec` with (its shape is relaxed)."""
  if spec.dtype in (tf.resource, tf.variant):
    raise TypeError(
        f'A step function of a fused run returns a {spec.dtype.name} tensor, which '
        'cannot be carried from one step of the loop to the next. Return '
        'numeric, boolean or string tensors, or use steps_per_loop=1.')
  shape = ([0 if d is None else d for d in spec.shape.as_list()]
           if spec.shape.rank is not None else [])
  return tf.zeros(shape, spec.dtype)


class _Functions:
  """What a family's functions compute, and those traced for it, by feed signature.

  `variables`, `names`, `stop_ifs` (name, predicate) and `returning` (indices of
  steps whose results are fetched) are what its runs fetched; the functions are
  kept by feed signature and by relaxed feed specs (one per relaxation).
  """

  def __init__(self, variables=(), names=(), stop_ifs=(), returning=()):
    self.variables = list(variables)
    self.names = list(names)
    self.stop_ifs = list(stop_ifs)
    self.returning = set(returning)
    self.compiled = {}  # feed signature -> _Compiled
    self.by_specs = {}  # relaxed feed specs -> _Compiled

  def reading(self, named_variables, counted):
    """What a function computes when `named_variables` (fetched names that name
    variables) are read as variables are: the names become variables, except
    `counted` (a global step counted in Python, never an output)."""
    if not named_variables:
      return self
    variables = list(self.variables)
    for variable in named_variables.values():
      if variable is not counted and not any(variable is v for v in variables):
        variables.append(variable)
    return _Functions(variables, [n for n in self.names if n not in named_variables],
                      self.stop_ifs, self.returning)


class CompiledCall:
  """The compiled function of one family of call structures (see the module doc).

  Args:
    steps: The StepGraphs of the family, in call order: the caller's first.
    loop_count: For a fused family, how many leading steps form the loop;
      None for calls of one step.
    feed_keys: The feed keys of the family's calls.
    summaries: The RecordSummaries leaf of the first call, or None.
    global_step: The global step variable the calls count or read, or None.
    stop_flag: For a fused family, a bool variable: once true, the loop ends
      after the step it is running.
    on_variables: Called with the family's traced step graphs and the
      variables its runs fetch, after the steps are traced and before the
      function calling them first runs.
    agreement: For a fused family of a multi-worker session, its
      WorkerAgreement: each call starts by agreeing with the other workers, and
      the local stop flag is not read (a worker ending its loop alone would
      leave the others blocked in a collective).
    alongside: The compiler's list of Pending work for the next call (see
      CallCompiler.alongside_next_call), shared by its families.
    known_variables: Returns the variables of every step the session traced,
      which fetched names may name.
    feed_dtypes: The session's FeedDtypes, which checks feeds when traced.
  """

  def __init__(self, steps, loop_count, feed_keys, summaries, global_step,
               stop_flag=None, on_variables=None, agreement=None, alongside=None,
               known_variables=None, feed_dtypes=None):
    self._steps = steps
    self._feed_dtypes = feed_dtypes or FeedDtypes()
    self._known_variables = known_variables or (lambda: [])
    self._alongside = alongside if alongside is not None else []
    self._agreement = agreement
    # Called with the variables of the step graphs before a new function runs.
    self._on_variables = on_variables or (lambda traces, fetched: None)
    # A bool variable that ends a fused loop after its current step when true.
    self._stop_flag = stop_flag
    self._loop_count = loop_count
    self._feed_keys = feed_keys
    self._writer = summaries.writer if summaries else None
    self._summary_step = summaries.global_step if summaries else None
    self._global_step = global_step
    # Counted in Python when the calls count the global step: never an output.
    self._counted = global_step if loop_count is None else None
    # The union of what the family's calls fetched. A fused call has the
    # global step from the start: what a hook reads of it (its value before
    # the last step) costs nothing when the step adds a known constant.
    self._union = _Functions([] if loop_count is None else [global_step])
    # Unfused calls that fetch nothing of the union (a loop whose hooks are all
    # idle this run) use a function without its outputs: an output a call does
    # not read still costs ~10 µs a call on a small step (BUILD_NOTES.md).
    self._bare_plans = set()
    self._bare = _Functions()
    self._specs = None   # the feed specs traced last, relaxed across shapes
    self.functions_built = 0

  def require(self, plan):
    """Adds what `plan` fetches to the union.

    Returns:
      The union as it was, if it grew (to `restore` if building fails), else None.
    """
    if self._loop_count is None and not (
        plan.names or plan.stop_ifs or plan.returning or
        any(v is not self._counted for v in plan.variables)):
      self._bare_plans.add(plan)
      return None
    union = self._union
    new_variables = [v for v in plan.variables if v is not self._counted and
                     not any(v is u for u in union.variables)]
    new_names = [n for n in plan.names if n not in union.names]
    new_stops = [s for s in plan.stop_ifs if s not in union.stop_ifs]
    new_returning = set(plan.returning) - union.returning
    if not (new_variables or new_names or new_stops or new_returning):
      return None
    self._union = _Functions(union.variables + new_variables,
                             union.names + new_names, union.stop_ifs + new_stops,
                             union.returning | new_returning)
    return union

  def built(self):
    """Whether a function of the current union has been built."""
    return bool(self._union.compiled)

  def restore(self, union):
    self._union = union

  def __call__(self, plan, flat_fetches, feed_dict, loop=None, value_before=None):
    """Runs one call of `plan` and returns its flat results as numpy values.

    Args:
      plan: The FetchPlan of the call; its fetches are in the union.
      flat_fetches: The call's flat fetch leaves.
      feed_dict: Its feeds.
      loop: For a fused family, `(max_steps, target_global_step)`.
      value_before: For a family that counts the global step, its value
        before the call, or None if not known.

    Returns:
      The flat results; with a global step, `(results, global_step_after)`; for
      a fused family, `(results, global_step_after, steps_run)`.
    """
    if self._feed_keys:
      tensors = [_feed_tensor(k, feed_dict[k]) for k in self._feed_keys]
      # Ints, also under TF1's shapes (disable_v2_tensorshape): not Dimensions,
      # which are unhashable.
      signature = tuple((t.dtype, tuple(t.shape.as_list())) for t in tensors)
    else:
      tensors = []
      signature = ()
    summaries = None
    if self._writer is not None:
      summaries = flat_fetches[plan.summaries_position]
      tensors.append(_constant_input(bool(summaries.record)))
    if loop is not None:
      # Loop bounds are inputs, so a run of another length never retraces.
      tensors += [tf.constant(loop[0], tf.int32), tf.constant(loop[1], tf.int64)]
      if self._agreement is not None:
        tensors += self._agreement.inputs()
    functions = self._bare if plan in self._bare_plans else self._union
    compiled = (functions.compiled.get(signature) or
                self._build(functions, tensors, signature))
    counted = self._counted
    layout = compiled.layout(plan, counted)
    if counted is not None and (_GLOBAL_STEP_BEFORE in layout or (
        value_before is None and compiled.global_step_index is None)):
      # Read now when fetched, as TF1 read a fetched variable at the run: the
      # count is the value before a hook's before_run waited, and another
      # thread may have moved it since (GlobalStepWaiterHook). Else read only
      # when calls we did not make may have moved it.
      value_before = int(counted.numpy())
    if summaries is not None and summaries.write_graph:
      # Serializing a big graph takes a while (ResNet-50: 0.2 s): done while
      # TensorFlow runs the call.
      self._alongside.append(alongside.Pending(
          functools.partial(_write_graph, summaries.writer, compiled.graph_to_write)))
    if self._alongside:
      outputs = alongside.call_alongside(self._alongside, compiled.call, tensors)
    else:
      outputs = compiled.call(tensors)
    results = []
    for position, entry in enumerate(layout):
      if type(entry) is int:  # pylint: disable=unidiomatic-typecheck
        if entry >= 0:
          results.append(outputs[entry].numpy())
        elif entry == fetch_plan.LAYOUT_NONE:
          results.append(None)
        elif entry == fetch_plan.LAYOUT_VALUE:
          results.append(_value_to_numpy(flat_fetches[position]))
        else:  # _GLOBAL_STEP_BEFORE
          results.append(np.array(value_before, counted.dtype.as_numpy_dtype)[()])
      else:
        nest, present, indices = entry
        values = iter(indices)
        results.append(fetch_plan.pack(nest, [outputs[next(values)].numpy() if p else None
                                    for p in present]))
    if loop is not None:
      index = compiled.global_step_index
      if self._agreement is not None:
        self._agreement.record(outputs[index + 2], outputs[index + 3])
      return results, int(outputs[index]), int(outputs[index + 1])
    if self._global_step is None:
      return results
    if compiled.global_step_index is not None:
      return results, int(outputs[compiled.global_step_index])
    return results, value_before + compiled.increment

  def _build(self, functions, tensors, signature):
    """Traces a function computing `functions`' fetches for this feed signature
    (tracing the steps as need be), and keeps it there."""
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in tensors]
    nf = len(self._feed_keys)
    if self._specs is not None:
      relaxed = [old.most_specific_common_supertype([new])
                 for old, new in zip(self._specs, specs[:nf])]
      if all(spec is not None for spec in relaxed):
        specs[:nf] = relaxed
    self._specs = specs[:nf]
    relaxed_signature = tuple((spec.dtype, tuple(spec.shape.as_list()))
                              for spec in specs[:nf])
    compiled = functions.by_specs.get(relaxed_signature)
    if compiled is not None:  # this shape fits the function of a relaxed one
      functions.compiled[signature] = compiled
      return compiled
    feed_specs = dict(zip(self._feed_keys, specs[:nf]))

    def step_feeds(step):
      return {k: feed_specs[k] for k in step.feed_keys(self._feed_keys)}

    def trace_steps(names=()):
      return [step.trace(step_feeds(step), names) for step in self._steps]

    self._feed_dtypes.check_feeds(feed_specs)
    try:
      traces = trace_steps()
    except Exception as e:
      self._feed_dtypes.add_note(e, feed_specs)
      raise
    for step, trace in zip(self._steps, traces):
      self._feed_dtypes.check_trace(step_feeds(step), trace)
    # What the steps use, and what runs fetch: a hook's own variable it only
    # fetches (an early-stopping flag) is state TF1's Saver saved too.
    self._on_variables(traces, functions.variables)
    sources = self._name_sources(functions, traces)
    named_variables = {}
    if any(source is None for source in sources.values()):
      # Names the steps do not return: tensor names in their graphs, else
      # variable names (TF1 resolved 'global_step:0' as any tensor).
      traces = trace_steps([n for n, s in sources.items() if s is None])
      sources = self._name_sources(functions, traces)
      named_variables = self._named_variables(functions, traces, sources)
    computed = functions.reading(named_variables, self._counted)
    fused = self._loop_count is not None
    involved = traces[:self._loop_count] if fused else traces
    increment = None
    if self._global_step is not None:
      increments = [t.increment(self._global_step) for t in involved]
      if None not in increments and sum(increments) > 0:
        increment = sum(increments)
    if functions is not self._bare and self._runs_the_step_itself(computed, increment,
                                                                  traces):
      compiled = self._step_itself(computed, traces[0], increment, named_variables)
    else:
      slots = {}  # filled in by the trace: where each fetchable is among the outputs
      body = self._fused_body if fused else self._body
      function = tf.function(
          functools.partial(body, computed, traces, sources, increment, slots),
          autograph=False)  # tfmon's own code: nothing to convert
      concrete = function.get_concrete_function(*specs)
      global_step_index = slots.pop('global_step_after', None)
      compiled = _Compiled(tf_internals.flat_caller(concrete), slots, increment, global_step_index,
                           traces[0].graph if traces else concrete.graph,
                           named_variables)
    self.functions_built += 1
    functions.compiled[signature] = functions.by_specs[relaxed_signature] = compiled
    return compiled

  def _runs_the_step_itself(self, functions, increment, traces):
    """Whether a function computing `functions` (not the bare ones) would only
    call the family's one step and return some of its outputs: the step's own
    function then serves as it.

    A bare function (fetching nothing) is not served so: an output a call does
    not read still costs it ~10 µs on a small step, and TensorFlow prunes what
    only the outputs need. Nor is a step that outputs nothing: grappler takes a
    function's outputs for what it must compute, and with none keeps what it
    would drop (a v1 optimizer's `minimize(loss)` in a step groups each op's
    gradients in a `tuple`: the CIFAR-10 tutorial's step then also computes
    conv1's gradient with respect to its input images, 1.17x its time). The
    function that calls it outputs a constant at least.
    """
    return (self._loop_count is None and len(self._steps) == 1 and
            not functions.variables and bool(traces[0].concrete.outputs) and
            # The global step after the call is counted, not read.
            (self._global_step is None or increment is not None))

  def _step_itself(self, functions, trace, increment, named_variables):
    """The _Compiled that calls the step's traced function itself."""
    slots = {}
    if 0 in functions.returning:
      slots[fetch_plan.STEP, 0] = _output_entry(trace.structure,
                                                list(range(trace.result_count)))
    for name in functions.names:
      slots[fetch_plan.NAME, name] = _output_entry(*trace.name_outputs(name))
    call = tf_internals.flat_caller(trace.concrete)
    if self._writer is not None:
      # The step takes `record` and its stamp offset first; the call gives its
      # feeds first (the step takes every one of them, in order).
      inner, nf = call, len(self._feed_keys)
      own_stamp = [_constant_input(1, tf.int64)]  # offset 1: see StepGraph
      call = lambda tensors: inner(tensors[nf:] + own_stamp + tensors[:nf])
    return _Compiled(call, slots, increment, None, trace.graph, named_variables)

  def _name_sources(self, functions, traces):
    """Per name fetched, the index of the step whose outputs hold it, or None."""
    sources = {}
    for name in functions.names:
      sources[name] = next((i for i, t in enumerate(traces) if name in t.returned),
                           None)
      if sources[name] is None:
        sources[name] = next((i for i, t in enumerate(traces) if name in t.names),
                             None)
    return sources

  def _named_variables(self, functions, traces, sources):
    """The variables named by fetched names no step returns or holds as a tensor.

    A name is a variable's name, with or without ':0' ('global_step',
    'dense/kernel'), else the end of exactly one variable's name after a '/'
    (Keras 3 puts a Sequential model's name before its layers': 'dense/kernel'
    is 'sequential/dense/kernel'). Candidates are the variables of the
    session's traced steps and the global step.

    Raises:
      ValueError: for a name that names nothing, or several variables.
    """
    variables = fetch_plan.unique_variables(
        [v for t in traces for v in t.variables] + self._known_variables() +
        [self._global_step, tf.compat.v1.train.get_global_step()])
    named = {}
    for name in [n for n, source in sources.items() if source is None]:
      matches = [v for v in variables if v.name == fetch_plan.tensor_name(name)]
      if not matches and ':' not in name:
        matches = [v for v in variables if v.name.endswith(f'/{name}:0')]
      if len(matches) == 1:
        named[name] = matches[0]
        continue
      if matches:
        raise ValueError(
            f'Fetch name {name!r} names {len(matches)} variables of this call '
            f'({sorted(v.name for v in matches)}): fetch the variable itself.')
      self._raise_unknown_name(name, traces, variables)
    for name, _ in functions.stop_ifs if self._loop_count is not None else ():
      if name in named:
        raise ValueError(
            f'{name!r} is checked after every step of a fused run (NanTensorHook), '
            f'but it names the variable {named[name].name}: return the value to '
            'check from the step function, in a dict.')
    return named

  def _raise_unknown_name(self, name, traces, variables):
    returned = sorted({key for t in traces for key in t.returned})
    graph_names = [n[:-2] if n.endswith(':0') else n for t in traces
                   for n in fetch_plan.user_named_tensors(t.graph)]
    variable_names = [v.name[:-2] if v.name.endswith(':0') else v.name
                      for v in variables]
    nearest = difflib.get_close_matches(
        name, list(dict.fromkeys(returned + graph_names + variable_names)), n=3)
    where = (f'whose step functions return {returned}' if traces
             else 'which runs no step function')
    raise ValueError(
        f'Fetch name {name!r} names no tensor or variable of this call, {where}; '
        f'nearest names: {nearest or "none"}.')

  def _inputs(self, inputs):
    """Splits a traced function's inputs: feeds by key, then `record`, then the rest."""
    nf = len(self._feed_keys)
    feeds = dict(zip(self._feed_keys, inputs[:nf]))
    if self._writer is None:
      return feeds, None, inputs[nf:]
    return feeds, inputs[nf], inputs[nf + 1:]

  def _stamp(self):
    """The global step before a step, plus one: what its summaries are stamped with."""
    return self._summary_step_value() + 1

  def _summary_step_value(self):
    return tf.cast(fetch_plan.read(self._summary_step), tf.int64)

  def _call_step(self, i, trace, feeds, record, stamp=None):
    """Calls step `i`, its summaries stamped `stamp`, or if None, with the
    summary step as the step reads it first, plus one (see StepGraph)."""
    keys = self._steps[i].feed_keys(self._feed_keys)
    offset = None
    if self._writer is not None:
      offset = (tf.constant(1, tf.int64) if stamp is None
                else stamp - self._summary_step_value())
    return trace([feeds[k] for k in keys], record, offset)

  def _emit(self, functions, slots, traces, sources, step_outputs, variable_values):
    """The outputs of what `functions` fetch, recording each one's slot."""
    outputs = []
    for variable, value in zip(functions.variables, variable_values):
      slots[fetch_plan.VARIABLE, id(variable)] = len(outputs)
      outputs.append(value)
    for i in sorted(functions.returning):
      count = traces[i].result_count
      slots[fetch_plan.STEP, i] = _output_entry(
          traces[i].structure, list(range(len(outputs), len(outputs) + count)))
      outputs += [step_outputs[i][j] for j in range(count)]
    for name in functions.names:
      i = sources[name]
      nest, indices = traces[i].name_outputs(name)
      slots[fetch_plan.NAME, name] = _output_entry(
          nest, list(range(len(outputs), len(outputs) + len(indices))))
      outputs += [step_outputs[i][j] for j in indices]
    return outputs

  def _body(self, functions, traces, sources, increment, slots, *inputs):
    """One call of the steps: variables read first, then the steps in order."""
    feeds, record, _ = self._inputs(inputs)
    # The first step stamps its summaries itself; later ones (hooks' callables)
    # are stamped as it is, as v1 stamped a run's summaries.
    stamp = self._stamp() if self._writer is not None and len(traces) > 1 else None
    variable_values = [fetch_plan.read(v) for v in functions.variables]
    step_outputs = [self._call_step(i, t, feeds, record, stamp if i else None)
                    for i, t in enumerate(traces)]
    outputs = self._emit(functions, slots, traces, sources, step_outputs,
                         variable_values)
    if self._global_step is not None and increment is None:
      # Read after the steps: automatic control dependencies order it so.
      slots['global_step_after'] = len(outputs)
      outputs.append(tf.cast(self._global_step.value(), tf.int64))
    return outputs or [tf.constant(True)]  # see _runs_the_step_itself

  def _fused_body(self, functions, traces, sources, increment, slots, *inputs):
    """Up to `max_steps` iterations of the loop steps, then the hooks' steps once.

    Stops early once the global step reaches `target` or after a step where a
    StopIf condition holds. Only the last iteration records summaries; fetched
    variables, names and results are those of the last iteration. With a
    WorkerAgreement, the workers first agree on `max_steps` and `target` (none
    if they agree to stop); the call also returns what they agreed.
    """
    feeds, record, (max_steps, target, *wishes) = self._inputs(inputs)
    loop_count = self._loop_count
    global_step = self._global_step
    agreement = self._agreement
    if agreement is not None:
      stop, save, max_steps, target = agreement.agree(*wishes, max_steps, target)
      max_steps = tf.cast(tf.where(stop > 0, tf.constant(0, tf.int64), max_steps),
                          tf.int32)
      if record is not None:
        record = tf.logical_and(record, stop == 0)

    def global_step_value():
      return tf.cast(fetch_plan.read(global_step), tf.int64)

    # What the loop carries: the union's variables as read before each step
    # (the counted global step excepted: it is the value after minus the
    # increment), and the outputs of the loop's steps that are fetched.
    carried_variables = [v for v in functions.variables
                         if not (increment is not None and v is global_step)]
    carried_outputs = []  # (step, output index)
    for i in sorted(functions.returning):
      if i < loop_count:
        carried_outputs += [(i, j) for j in range(traces[i].result_count)]
    for name in functions.names:
      i = sources[name]
      if i < loop_count:
        carried_outputs += [(i, j) for j in traces[i].name_outputs(name)[1]
                            if (i, j) not in carried_outputs]
    for name, _ in functions.stop_ifs:
      if sources[name] >= loop_count:
        raise ValueError(
            f'{name!r} is checked after every step of a fused run (NanTensorHook), '
            'but no step function of the loop returns it. Return it from the '
            'step function the session runs.')
    stop_positions = [
        (len(carried_variables) +
         carried_outputs.index((sources[name], traces[sources[name]].name_outputs(name)[1][0])),
         predicate)
        for name, predicate in functions.stop_ifs]

    limit = max_steps
    if increment is not None:
      # "Until the global step reaches the target" is then a number of
      # iterations, which spares the loop condition a variable read per step.
      more = (target - global_step_value() + increment - 1) // increment
      limit = tf.cast(tf.minimum(tf.cast(max_steps, tf.int64),
                                 tf.maximum(more, 1)), tf.int32)

    def condition(i, *carried):
      keep = i < limit
      checks = []
      if increment is None:
        checks.append(global_step_value() < target)
      if self._stop_flag is not None and agreement is None:
        checks.append(tf.logical_not(self._stop_flag.read_value()))
      for position, predicate in stop_positions:
        holds = predicate(carried[position])
        checks.append(tf.logical_not(
            holds if holds.shape.rank == 0 else tf.reduce_any(holds)))
      if checks:
        # The first iteration always runs: the carried values are placeholders.
        keep = tf.logical_and(keep, tf.logical_or(
            tf.equal(i, 0), functools.reduce(tf.logical_and, checks)))
      return keep

    def loop_body(i, *unused_carried):
      stamp = recording = None
      if self._writer is not None:
        last = i + 1 >= limit
        if increment is None or loop_count > 1:
          stamp = self._stamp()  # the first step reads its own, the same
          if increment is None:
            last = tf.logical_or(last, stamp >= target)
        recording = tf.logical_and(record, last)
      values = [fetch_plan.read(v) for v in carried_variables]
      step_outputs = [self._call_step(s, traces[s], feeds, recording,
                                      stamp if s else None)
                      for s in range(loop_count)]
      return (i + 1, *values, *[step_outputs[s][j] for s, j in carried_outputs])

    initial = [_zeros(tf.TensorSpec(v.shape, v.dtype)) for v in carried_variables]
    initial += [_zeros(traces[s].output_specs[j]) for s, j in carried_outputs]
    # parallel_iterations=1: a step must not start before the previous one ended.
    steps_run, *carried = tf.while_loop(
        condition, loop_body, [tf.constant(0), *initial], parallel_iterations=1,
        shape_invariants=[tf.TensorShape([])] + [tf.TensorShape(None)] * len(initial))
    global_step_after = global_step_value()
    # Hooks' step functions run once, after the loop, stamped as v1 stamped a
    # run's summaries: with the global step after it.
    step_outputs = {}
    for s in range(loop_count, len(traces)):
      step_outputs[s] = self._call_step(s, traces[s], feeds, record,
                                        global_step_after)
    for (s, j), value in zip(carried_outputs, carried[len(carried_variables):]):
      step_outputs.setdefault(s, {})[j] = value
    variable_values = []
    carried_values = iter(carried[:len(carried_variables)])
    for v in functions.variables:
      if any(v is c for c in carried_variables):
        variable_values.append(next(carried_values))
      else:  # the counted global step, before the last step
        variable_values.append(tf.cast(global_step_after - increment, v.dtype))
    outputs = self._emit(functions, slots, traces, sources, step_outputs,
                         variable_values)
    slots['global_step_after'] = len(outputs)
    outputs += [global_step_after, steps_run]
    if agreement is not None:
      outputs += [stop, save]
    return outputs


def _write_graph(writer, graph):
  with writer.as_default():
    tf.summary.graph(graph)
