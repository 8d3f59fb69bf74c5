"""FetchPlan: what one call structure of `run` computes, as one traceable body.

A `run(fetches, feed_dict)` call is flattened into leaves. Each leaf is one of:
a step function (any callable), `op(fn)`, a variable, a name, a plain value
(tensor, numpy or Python number), or None. The plan keeps the distinct step
functions, variables and names of a call structure and builds `body`, the
Python function that `CompiledCall` traces once into a `tf.function`:

  1. read every fetched variable (the value before any step runs, as TF1's
     Session.run gave the pre-step global step);
  2. run the step functions in flattened order, each with the feeds that match
     its parameter names;
  3. resolve names: keys of dicts returned in this call, then tensor names of the
     traced graph (how TF1 hooks found 'softmax_tensor').

A `RecordSummaries` leaf (what SummarySaverHook fetches) makes `body` run under
that hook's `tf.summary` writer, recording only when the call's boolean `record`
input is true: one trace serves recording and non-recording steps.

`body` is one step. `fused_body` runs the caller's step functions (the leading
`loop_leaves` leaves) in a `tf.while_loop` of up to `max_steps` iterations that
ends early once the global step reaches `target` or a `StopIf` condition holds,
then computes the hooks' fetches once, as of the last iteration (step fusion).
"""

import contextlib
import functools

import inspect
import numbers
import re
import sys

import numpy as np
import tensorflow as tf

from tfmon.compiled import step_increment

# Leaf kinds. A leaf's kind depends only on its Python type, so it is cached per
# type and classifying a leaf on the hot path is one dict lookup.
(NONE, NAME, STEP, OP, VARIABLE, VALUE, SUMMARIES, STOP_IF, WRITE_SCALAR,
 INVALID) = range(10)

# Layout codes for leaves that are not outputs of the compiled call.
LAYOUT_NONE = -1
LAYOUT_VALUE = -2


class StepOp:
  """A step function whose results stay on the device: TF1's `train_op`.

  Fetching `op(fn)` runs `fn` like any step function, but its leaf returns None,
  so a loop that never reads the step's outputs pays no device-to-host copy.
  Hooks can still fetch the names of the dict it returns.
  """

  __slots__ = ('fn',)

  def __init__(self, fn):
    if not callable(fn):
      raise TypeError(f'op() takes a step function (a callable); got {fn!r} of '
                      f'type {type(fn).__name__}.')
    self.fn = fn

  def __eq__(self, other):
    return type(other) is StepOp and other.fn == self.fn

  def __hash__(self):
    return hash((StepOp, self.fn))

  def __repr__(self):
    return f'op({describe(self.fn)})'


def op(fn):
  """Returns a fetch that runs step function `fn` without returning its results.

  Args:
    fn: A step function, as any callable leaf of `run` fetches.

  Returns:
    A fetch whose result is None.

  Raises:
    TypeError: if `fn` is not callable.
  """
  return StepOp(fn)


class RecordSummaries:
  """Fetch: run this call under `writer`, recording its tf.summary calls if `record`.

  Summaries are stamped with the global step before the call plus one: the
  post-step global step of a step that increments it by one, as v1's
  SummarySaverHook stamped them. The leaf's result is None.

  Args:
    writer: A `tf.summary.SummaryWriter`.
    record: Whether this call records.
    global_step: The global step variable.
    write_graph: Whether to write the call's graph (for TensorBoard's Graphs tab).
  """

  __slots__ = ('writer', 'record', 'global_step', 'write_graph')

  def __init__(self, writer, record, global_step, write_graph=False):
    self.writer = writer
    self.record = record
    self.global_step = global_step
    self.write_graph = write_graph


class StopIf:
  """Fetch: the tensor named `name`; in a fused run, also ends the loop after a
  step where `predicate(tensor)` holds (how NanTensorHook stops at the NaN step).

  Args:
    name: A key of a dict returned by a step function of the call.
    predicate: A function from the tensor to a boolean tensor (any element true
      stops the loop).
  """

  __slots__ = ('name', 'predicate')

  def __init__(self, name, predicate):
    self.name = name
    self.predicate = predicate


class WriteScalar:
  """Fetch: write the scalar `value` as summary `tag` at `step` into `writer`.

  For values a hook computes in Python after a run (StepCounterHook's
  `global_step/sec`): fetched in its next run, the write is part of that run's
  compiled call instead of a TensorFlow call of its own. The leaf's result is None.

  Args:
    writer: A `tf.summary.SummaryWriter`.
    tag: The summary tag.
    value: A Python number.
    step: The step to stamp it with.
  """

  __slots__ = ('writer', 'tag', 'value', 'step')

  def __init__(self, writer, tag, value, step):
    self.writer = writer
    self.tag = tag
    self.value = value
    self.step = step


_kind_by_type = {type(None): NONE, str: NAME, StepOp: OP, RecordSummaries: SUMMARIES,
                 StopIf: STOP_IF, WriteScalar: WRITE_SCALAR}


# Every type met as a fetch leaf so far (a live view: it grows with leaf_kind).
LEAF_TYPES = _kind_by_type.keys()


def _is_variable(leaf):
  if isinstance(leaf, tf.Variable):
    return True
  keras = sys.modules.get('keras')  # a Keras variable exists only if Keras is loaded
  return keras is not None and isinstance(leaf, getattr(keras, 'Variable', ()))


def _classify(leaf):
  if _is_variable(leaf):
    return VARIABLE
  if isinstance(leaf, (tf.Tensor, np.ndarray, np.generic, numbers.Number)):
    return VALUE
  if callable(leaf):
    return STEP
  return INVALID


def leaf_kind(leaf):
  kind = _kind_by_type.get(type(leaf))
  if kind is None:
    kind = _kind_by_type[type(leaf)] = _classify(leaf)
  return kind


def leaf_key(leaf):
  """The part of the cache key of a call that this leaf contributes."""
  kind = leaf_kind(leaf)
  if kind == VALUE:
    return VALUE  # values are returned as they are and never enter the call
  if kind == VARIABLE or kind == INVALID:
    return (kind, id(leaf))  # variables are unhashable; the plan keeps them alive
  if kind == SUMMARIES:  # whether this call records is an input, not structure
    return (kind, id(leaf.writer), id(leaf.global_step))
  if kind == STOP_IF:
    return (kind, leaf.name, leaf.predicate)
  if kind == WRITE_SCALAR:  # the value and step are inputs of the call
    return (kind, id(leaf.writer), leaf.tag)
  if kind == STEP:
    try:
      hash(leaf)
    except TypeError:
      return (STEP, id(leaf))
  return leaf


def check_fetches(fetches, arg_name):
  """Raises TypeError, naming `arg_name`, if a leaf of `fetches` is not fetchable.

  What `run` can fetch is SPEC section 2; this checks it when a hook is built,
  rather than at the first run that would fetch it (which, for FinalOpsHook, is
  the end of training).

  Args:
    fetches: A nest of fetch leaves.
    arg_name: How the caller names `fetches` in the message, e.g.
      "LoggingTensorHook tensors['loss']".

  Raises:
    TypeError: if a leaf is neither a step function, `op(fn)`, a variable, a
      name, a tensor or numpy value, nor None; or is a graph tensor.
  """
  for leaf in tf.nest.flatten(fetches):
    kind = leaf_kind(leaf)
    if kind == VALUE and tf.is_symbolic_tensor(leaf):
      raise TypeError(
          f'{arg_name} is the graph tensor {leaf!r}. tfmon runs eagerly: give the '
          'step function that computes it, or its name.')
    if kind in (INVALID, SUMMARIES):
      raise TypeError(
          f'{arg_name} holds {leaf!r} of type {type(leaf).__name__}, which run() '
          'cannot fetch. Give a tensor name (str), a step function (a callable), a '
          'tf.Variable, a tensor or numpy value, alone or in lists, tuples and dicts.')


def describe(fn):
  return getattr(fn, '__qualname__', None) or getattr(fn, '__name__', None) or repr(fn)


def _traceable(fn):
  """The Python function behind a `tf.function`, so it traces inline.

  Calling a tf.function inside our tf.function would nest a second function
  graph, hiding its tensor names from name fetches and adding a call op per step.
  `_python_function` is the bound wrapper for tf.function methods, where the public
  `python_function` is the unbound one.
  """
  if isinstance(fn, tf.types.experimental.PolymorphicFunction):
    inner = getattr(fn, '_python_function', None) or getattr(fn, 'python_function', None)
    if callable(inner):
      return inner
  return fn


class _StepFunction:
  """One step function of a plan and the feeds it takes.

  With `jit_compile`, the step is its own XLA-compiled tf.function inside the
  call; the hooks' fetches and summary writing stay outside it, since XLA cannot
  compile summary writes.
  """

  def __init__(self, fn, jit_compile=None):
    self.fn = _traceable(fn)
    self.name = describe(fn)
    self._call = tf.function(self.fn, jit_compile=True) if jit_compile else self.fn
    try:
      parameters = inspect.signature(self.fn).parameters.values()
    except (TypeError, ValueError):
      parameters = ()  # a builtin without a signature takes no feeds
    self.takes_all_feeds = any(p.kind is p.VAR_KEYWORD for p in parameters)
    self.parameters = [
        p.name for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    self.required = [
        p.name for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                               p.POSITIONAL_OR_KEYWORD,
                                               p.KEYWORD_ONLY)
    ]

  def check_feeds(self, feed_keys):
    for name in self.required:
      if name not in feed_keys:
        raise ValueError(
            f'Step function {self.name} requires parameter {name!r}, but '
            f'feed_dict has no {name!r} key (feed keys: {sorted(feed_keys)}). '
            f'Feed it by name: run({self.name}, feed_dict={{{name!r}: value}}), '
            'or give the parameter a default.')

  def __call__(self, feeds):
    if self.takes_all_feeds:
      kwargs = feeds
    else:
      kwargs = {k: feeds[k] for k in self.parameters if k in feeds}
    result = self._call(**kwargs)
    return tf.nest.map_structure(lambda x: _as_output(x, self.name), result)


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def _as_output(value, step_name):
  """A step's returned leaf as a traced tensor, or None."""
  if value is None or isinstance(value, tf.Tensor):
    return value
  if isinstance(value, tf.Operation):
    return None  # TF1 returned None for fetched ops
  if _is_variable(value):
    return tf.identity(value)  # its value after the step
  if isinstance(value, (numbers.Number, np.ndarray, np.generic)):
    return tf.constant(value)
  if isinstance(value, tf.distribute.DistributedValues):
    raise TypeError(
        f'Step function {step_name} returned {value!r}, one value per replica '
        'of a tf.distribute strategy. Return one value: reduce it in the step, '
        "e.g. strategy.reduce('SUM', value, axis=None), or return the replicas' "
        'values as a tuple: strategy.experimental_local_results(value).')
  raise TypeError(
      f'Step function {step_name} returned {value!r} of type '
      f'{type(value).__name__}, which is not numeric. A step function returns '
      'tensors, numbers, numpy values or None, alone or in lists, tuples and dicts.')


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def _read(variable):
  if isinstance(variable, tf.Variable):
    return variable.read_value()
  return tf.convert_to_tensor(variable)  # a Keras variable


_OP_TYPE_SUFFIX = r'(_\d+)?'


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def _user_named_tensors(graph, limit=20):
  """Tensor names in `graph` that someone chose (not TF's op-type defaults)."""
  names = []
  for graph_op in graph.get_operations():
    base = graph_op.name.rsplit('/', 1)[-1]
    if re.fullmatch(re.escape(graph_op.type) + _OP_TYPE_SUFFIX, base):
      continue
    if 'gradient_tape/' in graph_op.name or not graph_op.outputs:
      continue
    names.append(graph_op.outputs[0].name)
  if len(names) > limit:
    names = names[:limit] + [f'... {len(names) - limit} more']
  return names


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def _resolve_name(name, returned, fused=False):
  if name in returned:
    return returned[name]
  if fused:
    # After the loop only the first (peeled) step's graph is in scope: a tensor
    # name there would give the run's first step, not its last.
    raise ValueError(
        f'Fetch name {name!r} is not a key of a dict returned by the step functions '
        f'of this fused run ({sorted(returned)}). A fused run (steps_per_loop > 1) '
        'resolves only returned names: return the tensor from your step function '
        f"(return {{{name!r}: tensor}}), or use steps_per_loop=1 for graph names.")
  graph = tf.compat.v1.get_default_graph()
  try:
    return graph.get_tensor_by_name(name if ':' in name else name + ':0')
  except (KeyError, ValueError):
    pass
  raise ValueError(
      f'Fetch name {name!r} names no tensor of this call. Names are keys of dicts '
      f'returned by the step functions of the call ({sorted(returned)}) or tensor '
      f'names in the traced graph ({_user_named_tensors(graph)}). Return the tensor '
      f"from your step function in a dict (return {{{name!r}: tensor}}) or name it "
      f"(tf.identity(tensor, name={name!r})).")


class FetchPlan:
  """The distinct things one call structure computes, and where each leaf's result is.

  Args:
    flat_fetches: The flattened fetches of a call.
    feed_keys: The feed_dict keys of the call, in the order values are passed.

  Raises:
    TypeError: a leaf of an unsupported type, or a feed key that is not a string.
    ValueError: a feed key no step function takes, or a required parameter unfed.
  """

  def __init__(self, flat_fetches, feed_keys, loop_leaves=None, global_step=None,
               jit_compile=None):
    self.feed_keys = tuple(feed_keys)
    self.loop_leaves = loop_leaves
    self._global_step = global_step
    self._stop_conditions = []  # (index in self._names, predicate)
    self._loop_step_count = 0   # the first steps are the loop's (fused plans)
    self._variables = []
    self._steps = []
    self._names = []
    self.summaries = None  # the RecordSummaries leaf of the call, if any
    self.summaries_position = None
    self.scalar_positions = []  # positions of the WriteScalar leaves
    self._scalars = []          # their (writer, tag)
    step_index = {}       # step function -> index in self._steps
    returning_steps = []  # indices of steps whose results are fetched
    layout = []           # per leaf: (source, index) or a layout code
    for position, leaf in enumerate(flat_fetches):
      kind = leaf_kind(leaf)
      if kind == NONE:
        layout.append(LAYOUT_NONE)
      elif kind == SUMMARIES:
        if self.summaries is not None and leaf_key(leaf) != leaf_key(self.summaries):
          raise ValueError(
              'Two summary writers asked to record the same call; a call records '
              'into one writer. Give SummarySaverHooks the same output_dir.')
        self.summaries, self.summaries_position = leaf, position
        layout.append(LAYOUT_NONE)
      elif kind == WRITE_SCALAR:
        self.scalar_positions.append(position)
        self._scalars.append((leaf.writer, leaf.tag))
        layout.append(LAYOUT_NONE)
      elif kind == VALUE:
        if tf.is_symbolic_tensor(leaf):
          raise TypeError(
              f'Fetch {leaf!r} is a graph tensor. tfmon runs eagerly: fetch the '
              'step function that computes it, or its name.')
        layout.append(LAYOUT_VALUE)
      elif kind == VARIABLE:
        index = next((i for i, v in enumerate(self._variables) if v is leaf), None)
        if index is None:
          index = len(self._variables)
          self._variables.append(leaf)
        layout.append((VARIABLE, index))
      elif kind == STOP_IF:
        if leaf.name not in self._names:
          self._names.append(leaf.name)
        index = self._names.index(leaf.name)
        self._stop_conditions.append((index, leaf.predicate))
        layout.append((NAME, index))
      elif kind == NAME:
        if leaf not in self._names:
          self._names.append(leaf)
        layout.append((NAME, self._names.index(leaf)))
      elif kind == STEP or kind == OP:
        fn = leaf.fn if kind == OP else leaf
        key = leaf_key(fn)
        if key not in step_index:
          step_index[key] = len(self._steps)
          self._steps.append(_StepFunction(fn, jit_compile))
          if loop_leaves is not None and position < loop_leaves:
            self._loop_step_count = len(self._steps)
        if kind == OP:
          layout.append(LAYOUT_NONE)
        else:
          if step_index[key] not in returning_steps:
            returning_steps.append(step_index[key])
          layout.append((STEP, returning_steps.index(step_index[key])))
      else:
        raise TypeError(
            f'Fetch argument {leaf!r} has invalid type {type(leaf).__name__}. '
            'Fetch a step function (a callable), tfmon.train.op(fn), a tf.Variable, '
            'a tensor name (str), a tensor or numpy value, or None, alone or in '
            'lists, tuples, dicts and namedtuples.')
    self._returning_steps = returning_steps
    self._check_feeds()
    # Outputs of `body` are [*variables, *returned step results, *names].
    offsets = {VARIABLE: 0, STEP: len(self._variables),
               NAME: len(self._variables) + len(returning_steps)}
    self.layout = [
        entry if isinstance(entry, int) else offsets[entry[0]] + entry[1]
        for entry in layout
    ]

  def _check_feeds(self):
    for key in self.feed_keys:
      if not isinstance(key, str):
        raise TypeError(
            f'feed_dict key {key!r} is a {type(key).__name__}. tfmon feeds step '
            'functions by parameter name: use the parameter name as the key, e.g. '
            "feed_dict={'images': batch}.")
    accepted = set()
    for step in self._steps:
      step.check_feeds(self.feed_keys)
      accepted.update(step.parameters)
    if any(step.takes_all_feeds for step in self._steps):
      return
    for key in self.feed_keys:
      if key not in accepted:
        parameters = {s.name: s.parameters for s in self._steps}
        raise ValueError(
            f'feed_dict key {key!r} matches no parameter of the step functions in '
            f'this call (parameters: {parameters or "no step function is fetched"}). '
            'Feed keys name step-function parameters: rename the key or add the '
            'parameter.')

  @property
  def step_names(self):
    return [step.name for step in self._steps]

  def _summary_scope(self, step_start, record):
    """Runs the enclosed summary calls under the requesting hook's writer."""
    if record is None:
      return contextlib.nullcontext()
    scope = contextlib.ExitStack()
    scope.enter_context(self.summaries.writer.as_default(step=step_start + 1))
    scope.enter_context(tf.summary.record_if(record))
    return scope

  def _write_scalars(self, inputs):
    """Writes the WriteScalar leaves' values: inputs after the feeds, two each."""
    first = len(self.feed_keys)
    for i, (writer, tag) in enumerate(self._scalars):
      value, step = inputs[first + 2 * i], inputs[first + 2 * i + 1]
      with writer.as_default(step=step), tf.summary.record_if(True):
        tf.summary.scalar(tag, value)

  def body(self, *inputs):
    """Runs one step of this call structure; traced by CompiledCall.

    Args:
      *inputs: The feed values in `feed_keys` order, the value and step of each
        WriteScalar leaf, then, if the call records summaries, the boolean
        `record`.

    Returns:
      The outputs: variable values, results of fetched steps, named tensors.
    """
    feeds = dict(zip(self.feed_keys, inputs))
    self._write_scalars(inputs)
    step_start, record = None, None
    if self.summaries is not None:
      step_start = tf.cast(_read(self.summaries.global_step), tf.int64)
      record = inputs[-1]
    with self._summary_scope(step_start, record):
      variable_values = [_read(v) for v in self._variables]
      results = [step(feeds) for step in self._steps]
    return self._outputs(variable_values, results)

  def fused_body(self, *inputs):
    """Runs up to `max_steps` steps of the caller's step functions, then the rest.

    Whether the run records summaries is part of a fused plan's structure
    (`summaries.record` when the plan was made), not an input. A recording run
    stops its loop one step early and runs that last step after it, under the
    summary writer, so no loop iteration carries summary ops.

    Args:
      *inputs: The feed values, the value and step of each WriteScalar leaf,
        then `max_steps` (int32) and `target` (int64): the loop ends after
        `max_steps` iterations, once the global step reaches `target`, or after
        an iteration where a StopIf condition holds.

    Returns:
      The outputs of `body` as of the last iteration, then the global step after
      the call and the number of iterations run.
    """
    feeds = dict(zip(self.feed_keys, inputs))
    self._write_scalars(inputs)
    max_steps, target = inputs[-2], inputs[-1]
    record = self.summaries is not None and self.summaries.record
    loop_steps = self._steps[:self._loop_step_count]

    def global_step():
      return tf.cast(_read(self._global_step), tf.int64)

    def iteration(i, record_this_step=False):
      step_start = None
      if record_this_step:
        step_start = global_step()
      # The root name scope: inside tf.while_loop, summary tags (and tensor names)
      # would otherwise read 'while/loss'.
      with tf.name_scope(''), self._summary_scope(
          step_start, True if record_this_step else None):
        variable_values = [_read(v) for v in self._variables]
        results = [step(feeds) for step in loop_steps]
      return variable_values, results

    def stop_condition(carried):
      """Whether a StopIf condition holds after the step `carried` is from, or
      None without StopIf fetches (then nothing about it enters the loop)."""
      returned = _returned(carried[1])
      holds = []
      for index, predicate in self._stop_conditions:
        value = predicate(_resolve_name(self._names[index], returned, fused=True))
        holds.append(value if value.shape.rank == 0 else tf.reduce_any(value))
      return functools.reduce(tf.logical_or, holds) if holds else None

    # A recording run leaves its last step to run after the loop, under the
    # summary writer: the loop's steps then carry no summary ops at all.
    loop_limit = max_steps - 1 if record else max_steps
    loop_target = target - 1 if record else target
    carried = iteration(tf.constant(0))
    # The first iteration runs outside the loop so that the carried values (the
    # last iteration's results) have a structure and types to start from.
    flat = tf.nest.flatten(carried)
    present = [t is not None for t in flat]

    def flatten(carried):
      return [t for t in tf.nest.flatten(carried) if t is not None]

    def unflatten(tensors):
      tensors = iter(tensors)
      return tf.nest.pack_sequence_as(
          carried, [next(tensors) if p else None for p in present])

    # So far the graph uses the global step only in the peeled iteration. If
    # every iteration adds the same c > 0, "until the global step reaches the
    # target" is a number of iterations, which spares the condition a variable
    # read per iteration (~3 µs a step on a small model; BUILD_NOTES.md).
    increment = step_increment.constant_increment(
        tf.compat.v1.get_default_graph(), self._global_step)
    reads_global_step = increment is None or increment < 0
    if not reads_global_step:
      more = (loop_target - global_step() + increment - 1) // increment
      loop_limit = tf.cast(
          tf.minimum(tf.cast(loop_limit, tf.int64), 1 + tf.maximum(more, 0)),
          tf.int32)

    # Stop conditions are evaluated here, on the carried values, rather than
    # carried as a flag of their own: each loop variable costs every iteration
    # (~3 µs a step on a small model; BUILD_NOTES.md).
    def condition(i, *tensors):
      keep = i < loop_limit
      if reads_global_step:
        keep = tf.logical_and(keep, global_step() < loop_target)
      stop = stop_condition(unflatten(tensors))
      if stop is not None:
        keep = tf.logical_and(keep, tf.logical_not(stop))
      return keep

    def loop_body(i, *unused_tensors):
      return (i + 1, *flatten(iteration(i)))

    tensors = flatten(carried)
    # parallel_iterations=1: a step must not start before the previous one ended.
    steps_run, *tensors = tf.while_loop(
        condition, loop_body, [tf.constant(1), *tensors], parallel_iterations=1,
        shape_invariants=[tf.TensorShape([])] + [tf.TensorShape(None)] * len(tensors))
    carried = unflatten(tensors)
    if record:
      done = (steps_run >= max_steps) | (global_step() >= target)
      stop = stop_condition(carried)
      if stop is not None:
        done = done | stop
      carried = unflatten(tf.cond(
          done, lambda: flatten(carried),
          lambda: flatten(iteration(steps_run, record_this_step=True))))
      steps_run += tf.cast(tf.logical_not(done), tf.int32)
    variable_values, results = carried
    results = list(results)
    results += [step(feeds) for step in self._steps[self._loop_step_count:]]
    return self._outputs(variable_values, results, fused=True) + [global_step(),
                                                                   steps_run]

  def _outputs(self, variable_values, results, fused=False):
    step_values = [results[i] for i in self._returning_steps]
    returned = _returned(results)
    name_values = [_resolve_name(name, returned, fused) for name in self._names]
    return variable_values + step_values + name_values


def _returned(results):
  """The names a call's step results define: keys of returned dicts, first wins."""
  returned = {}
  for result in results:
    if isinstance(result, dict):
      for name, value in result.items():
        returned.setdefault(name, value)
  return returned
