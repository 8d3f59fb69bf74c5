"""StepGraph: one step function, its Python body traced once per feed signature.

A step function's Python body is where a big model spends seconds tracing, so a
session traces it once per feed signature and never again, whichever hooks
observe a run, fused or not, recording summaries or not (SPEC section 2). The
traced body is a concrete function that the session's compiled calls call;
TensorFlow inlines such calls, so running it costs what running it inline costs
(BUILD_NOTES.md, "Trace once").

What would otherwise make a retrace is an input of the concrete function:
  - `record` (bool): whether its `tf.summary` calls write. The body is traced
    under the session's summary writer with `tf.summary.record_if(record)`.
  - `stamp_offset` (int64): its summaries carry the summary step as the body
    reads it first, plus this. A call's first step is given 1 (the global step
    before it, plus one); a later one (a hook's summary callable after the
    caller's step) is given what stamps it like the first, as v1 stamped one
    run's summaries. Read here rather than given, the stamp lets a session call
    the step's function itself (CompiledCall), at no cost per call.
  - the feeds it takes by parameter name.

Its outputs are what the body returns (flattened, Nones left out) followed by
the graph tensors named in `names` that exist in its graph: tensor names live in
the traced graph, so a name first asked for after the trace retraces it once.

Variables the body creates are made eagerly while it is traced, so a step that
builds its model lazily is traced once, where tf.function traces it twice
(_created_eagerly_into); and inside the trace, TF1's trainable-variables
collection lists the variables the step has used (_TrainableVariablesUsed).
"""

import contextlib
import functools
import inspect
import numbers
import weakref

import numpy as np
import tensorflow as tf

from tfmon import tf_internals
from tfmon import tf_logging as logging
from tfmon.compiled import step_increment
from tfmon.compiled import v1_summaries
from tfmon.compiled.fetch_plan import describe, is_variable, read, tensor_name, unique_variables


def _traceable(fn):
  """The Python function behind a `tf.function`, so it traces inline.

  Calling a tf.function inside our trace would nest a second function graph,
  hiding its tensor names from name fetches. `_python_function` is the bound
  wrapper for tf.function methods, where the public `python_function` is the
  unbound one.
  """
  if isinstance(fn, tf.types.experimental.PolymorphicFunction):
    return tf_internals.python_function(fn) or fn
  return fn


def _call(fn, kwargs):
  return fn(**kwargs)


@functools.cache  # converted once, on first use: not at `import tfmon`
def _converted_call():
  return tf.autograph.to_graph(_call)


def _autograph_converted(fn):
  """`fn` run as tf.function runs its Python function: through autograph.

  Autograph converts `_call`, whose call of `fn` thereby goes through autograph's
  own dispatch, as in tf.function: methods, partials and callable objects are
  converted, `do_not_convert` is honoured, and what autograph cannot convert runs
  as it is, with its warning.
  """

  def call(**kwargs):
    try:
      return _converted_call()(fn, kwargs)
    except Exception as e:  # pylint: disable=broad-except
      # As tf.function does: the error re-raised with the user's code in its
      # message ("in user code: ... in step") rather than autograph's.
      metadata = getattr(e, 'ag_error_metadata', None)
      if metadata is None:
        raise
      raise metadata.to_exception(e)  # pylint: disable=raise-missing-from

  return call


def _computed_eagerly(initial_value):
  """`initial_value` (a callable, or a value) made outside the trace, or None if
  it depends on the trace's tensors. A callable stays a callable: a value to
  restore on creation is unwrapped only when a callable returns it."""
  with tf.init_scope():
    try:
      value = initial_value() if callable(initial_value) else initial_value
    except Exception:  # pylint: disable=broad-except
      return None  # tf.function's way, tried next, raises what is wrong
  if any(map(tf.is_symbolic_tensor,
             tf.nest.flatten(getattr(value, 'wrapped_value', value)))):
    return None  # tf.Variable(x * 2), tf.Variable([x, y])
  return (lambda: value) if callable(initial_value) else value


def _created_eagerly_into(created):
  """A variable creator making every variable of a trace eagerly, into `created`.

  tf.function traces a body a second time once its first trace created
  variables: the first trace initializes them in a `tf.cond` each. Keras `fit`
  traces its step once because it builds the model before tracing; a step that
  builds it lazily (a Keras model without Input, a TF1-style `get_variable`, an
  optimizer's slots) would pay its trace twice. So a variable whose initial
  value does not depend on the trace's tensors is made under `init_scope` with
  `experimental_enable_variable_lifting=False`, the public opt-out of
  tf.function's own creator: the variable is eager and initialized at once,
  and the first trace is the only one. An initial value computed from the
  step's tensors is left to tf.function (which lifts it, or fails as it does).
  Every variable made is appended to `created`, read or not: a v1 optimizer's
  update op takes its slots' handles and never reads them.
  """
  def creator(next_creator, **kwargs):
    if kwargs.get('experimental_enable_variable_lifting') is False:
      return next_creator(**kwargs)  # a function-local variable, by request
    if tf.executing_eagerly():  # under init_scope (optimizers make some there)
      variable = next_creator(**dict(kwargs, experimental_enable_variable_lifting=False))
    else:
      initial_value = _computed_eagerly(kwargs.get('initial_value'))
      if initial_value is None:
        variable = next_creator(**kwargs)
      else:
        with tf.init_scope():
          variable = next_creator(**dict(
              kwargs, initial_value=initial_value,
              experimental_enable_variable_lifting=False))
    created.append(variable)
    return variable
  return creator


class _TrainableVariablesUsed(list):
  """A function graph's TRAINABLE_VARIABLES collection: the trainable variables
  the graph has used so far, after what was added to the collection.

  TF1's `optimizer.minimize(loss)` without `var_list` (and
  `tf.compat.v1.trainable_variables()`) took the graph's trainable variables.
  A step's variables are eager, in no collection, so inside a trace that list
  was empty ("No variables to optimize."). The variables the step has read
  when it calls `minimize` are the ones its loss can depend on; an optimizer
  leaves out those without a gradient, as TF1 did.

  The variables used are FuncGraph's `_watched_variables`, which nested graphs
  (a cond branch, a while body) add to as well; the graph's collections hold
  this list in place of the outer graph's (`_collections`): both private, read
  through tf_internals.
  """

  def __init__(self, graph, added):
    super().__init__(added)
    self._graph = weakref.ref(graph)

  def _used(self):
    graph = self._graph()
    watched = tf_internals.watched_variables(graph)
    used = sorted((v for v in watched if getattr(v, 'trainable', False)),
                  key=lambda v: v.name)  # a set: sorted, so the order is stable
    return unique_variables(list(super().__iter__()) + used)

  def __iter__(self):
    return iter(self._used())

  def __len__(self):
    return len(self._used())


@contextlib.contextmanager
def _trainable_variables_used(graph):
  """Makes `graph`'s TRAINABLE_VARIABLES collection a _TrainableVariablesUsed."""
  collections = tf_internals.collections_of(graph)
  if collections is None:
    yield  # another TensorFlow: minimize() needs var_list, as it says
    return
  key = tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES
  original = collections.get(key)
  collections[key] = _TrainableVariablesUsed(graph, original or ())
  try:
    yield
  finally:
    if original is None:
      collections.pop(key, None)
    else:
      collections[key] = original


class StepGraph:
  """A step function, traced once per feed signature into a concrete function.

  With `jit_compile`, the step is its own XLA-compiled tf.function inside the
  trace; summary writing stays outside it, since XLA cannot compile summary writes.

  Args:
    fn: The step function.
    jit_compile: Compile the step with XLA.
    writer: The `tf.summary.SummaryWriter` its summaries go to, or None.
    summary_step: With a writer, the variable its summaries' step comes from.
  """

  def __init__(self, fn, jit_compile=None, writer=None, summary_step=None):
    self.fn = _traceable(fn)
    self.name = describe(fn)
    # Only the step is converted by autograph, not the body around it: converting
    # tfmon's own code (and running it through autograph's call wrappers) was
    # 0.55 s of a 0.65 s trace of the CIFAR-10 tutorial's step (BUILD_NOTES.md).
    # An XLA step is a tf.function of its own, which converts it.
    self._call = (tf.function(self.fn, jit_compile=True) if jit_compile
                  else _autograph_converted(self.fn))
    self._writer = writer
    self._summary_step = summary_step
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
    self._traced = {}  # feed signature -> _Trace
    self._names = []   # graph tensor names asked for, in order

  def check_feeds(self, feed_keys):
    for name in self.required:
      if name not in feed_keys:
        raise ValueError(
            f'Step function {self.name} requires parameter {name!r}, but '
            f'feed_dict has no {name!r} key (feed keys: {sorted(feed_keys)}). '
            f'Feed it by name: run({self.name}, feed_dict={{{name!r}: value}}), '
            'or give the parameter a default.')

  def feed_keys(self, feed_keys):
    """The keys of `feed_keys` this step takes, in `feed_keys` order."""
    if self.takes_all_feeds:
      return tuple(feed_keys)
    return tuple(k for k in feed_keys if k in self.parameters)

  def trace(self, feed_specs, names=()):
    """Returns the `_Trace` for feeds of these specs, tracing only if need be.

    Args:
      feed_specs: A dict from the feed keys this step takes to TensorSpecs.
      names: Graph tensor names the caller needs. A name not yet asked for that
        exists in the traced graph makes one more trace, which outputs it.
    """
    signature = tuple((k, s.dtype, tuple(s.shape.as_list())) for k, s in feed_specs.items())
    traced = self._traced.get(signature)
    new = [n for n in names if n not in self._names]
    if new:
      self._names.extend(new)
      if traced is not None and any(traced.has_tensor(n) for n in new):
        traced = None  # the graph holds a newly asked-for name: output it
    if traced is None:
      specs = list(feed_specs.values())
      if self._writer is not None:
        specs = [tf.TensorSpec([], tf.bool), tf.TensorSpec([], tf.int64)] + specs
      self._tracing = (tuple(feed_specs), list(self._names))
      created = []
      try:
        # Entered eagerly, the creator also sees variables made under
        # init_scope during the trace.
        with tf.variable_creator_scope(_created_eagerly_into(created)):
          # A new tf.function each time: the body depends on `_tracing`, which
          # the tf.function's own cache would not see.
          concrete = tf.function(self._body, autograph=False).get_concrete_function(*specs)
      except Exception as e:
        if hasattr(e, 'add_note'):  # Python 3.11+
          e.add_note(f'(raised while tracing step function {self.name} for run())')
        raise
      traced = _Trace(concrete, self._structure, self._found_names,
                      self._writer is not None, created)
      self._traced[signature] = traced
    return traced

  def _body(self, *inputs):
    """The traced body: the step under the summary writer, then its outputs."""
    keys, names = self._tracing
    with contextlib.ExitStack() as scope:
      # TF1 built a step's graph once: a later trace (a new feed shape, a
      # newly fetched name) gets the variables tf.compat.v1.get_variable made.
      scope.enter_context(tf.compat.v1.variable_scope(
          tf.compat.v1.get_variable_scope(), reuse=tf.compat.v1.AUTO_REUSE))
      scope.enter_context(_trainable_variables_used(tf.compat.v1.get_default_graph()))
      record = stamp = None
      if self._writer is not None:
        record, offset, inputs = inputs[0], inputs[1], inputs[2:]
        # Read first: before anything the step does to the global step.
        stamp = tf.cast(read(self._summary_step), tf.int64) + offset
        scope.enter_context(self._writer.as_default(step=stamp))
        scope.enter_context(tf.summary.record_if(record))
      # TF1's tf.compat.v1.summary calls: v1 protos, on recording steps only.
      v1_summaries_called = scope.enter_context(
          v1_summaries.written_on_record_steps(record, stamp))
      result = self._call(**dict(zip(keys, inputs)))
      result = tf.nest.map_structure(lambda x: _as_output(x, self.name), result)
      graph = tf.compat.v1.get_default_graph()
      self._structure = result
      self._found_names = []
      named = []
      for name in names:
        try:
          named.append(graph.get_tensor_by_name(tensor_name(name)))
        except (KeyError, ValueError):
          continue
        self._found_names.append(name)
      outputs = [t for t in tf.nest.flatten(result) if t is not None] + named
      v1_summaries_called.write_deferred(keep=outputs)
    return outputs


class _Trace:
  """One traced concrete function of a StepGraph and what its outputs are."""

  def __init__(self, concrete, structure, found_names, takes_summary_inputs,
               created_variables=()):
    self.concrete = concrete
    self.graph = concrete.graph
    # Every variable the step reads, writes or created while traced.
    self.variables = unique_variables(list(concrete.graph.variables) + list(created_variables))
    self.created_variables = list(created_variables)
    self.structure = structure  # the returned nest, tensors of the traced graph
    self.names = found_names    # graph names output after the returned tensors
    self._summary_inputs = takes_summary_inputs
    # Keys of a returned dict -> (their value's nest, its output indices).
    self.returned = {}
    flat = tf.nest.flatten(structure)
    self.result_count = sum(t is not None for t in flat)
    if isinstance(structure, dict):
      index = 0
      for key, value in sorted(structure.items()):  # tf.nest's order
        count = sum(t is not None for t in tf.nest.flatten(value))
        self.returned[key] = (value, list(range(index, index + count)))
        index += count
    self.output_specs = [tf.TensorSpec(t.shape, t.dtype) for t in concrete.outputs]

  def has_tensor(self, name):
    try:
      self.graph.get_tensor_by_name(tensor_name(name))
      return True
    except (KeyError, ValueError):
      return False

  def name_outputs(self, name):
    """`(nest, output indices)` of `name`: a returned key, else a graph name, else None."""
    if name in self.returned:
      return self.returned[name]
    if name in self.names:
      index = self.result_count + self.names.index(name)
      return self.graph.get_tensor_by_name(tensor_name(name)), [index]
    return None

  def increment(self, global_step):
    """What a call adds to `global_step`: 0 if it does not use it, None if unknown."""
    return step_increment.constant_increment(self.graph, global_step)

  def __call__(self, feeds, record=None, stamp_offset=None):
    """Calls the traced function inside another function's trace: its outputs."""
    args = list(feeds)
    if self._summary_inputs:
      args = [record, stamp_offset] + args
    return self.concrete(*args)


class FeedDtypes:
  """Warns, once per feed key, of a feed whose dtype will cost the model.

  Feeds keep the dtype they come with, and numpy's floats are float64: a
  float64 batch silently made a model float64 (its checkpoints too) at half
  its speed, or cast at every step where it met float32 variables. Checked
  when steps are traced for a feed signature, never per run.
  """

  def __init__(self):
    self._first = {}     # feed key -> its dtype at its first trace
    self._warned = set()

  def check_feeds(self, feed_specs):
    """Before tracing for `feed_specs` (key -> TensorSpec): a changed dtype."""
    for key, spec in feed_specs.items():
      first = self._first.setdefault(key, spec.dtype)
      if spec.dtype != first:
        self._warn(key, first, f'is {spec.dtype.name} where the first run fed '
                   f'{first.name}: the step is traced again for it')

  def check_trace(self, feed_specs, trace):
    """After a trace taking `feed_specs`: a float64 feed meeting its variables."""
    for key, spec in feed_specs.items():
      if spec.dtype != tf.float64:
        continue
      narrower = [v for v in trace.variables
                  if v.dtype.is_floating and v.dtype != tf.float64]
      made = [v for v in trace.created_variables if v.dtype == tf.float64]
      if narrower:
        self._warn(key, narrower[0].dtype, 'is float64 and meets the step\'s '
                   f'{narrower[0].dtype.name} variables ({_some(narrower)})')
      elif made:
        self._warn(key, tf.float32, 'is float64, and the step made float64 '
                   f'variables from it ({_some(made)}): a float64 model, at half '
                   'the speed')

  def add_note(self, error, feed_specs):
    """Adds to a trace's `error` which feeds are float64, if any: the likely cause
    of a dtype mismatch ("expected a float tensor but is a double tensor")."""
    keys = [k for k, spec in feed_specs.items() if spec.dtype == tf.float64]
    if keys and hasattr(error, 'add_note'):  # Python 3.11+
      error.add_note(
          f"(feed_dict[{keys[0]!r}] is float64, numpy's default for floats: if the "
          f"step computes in float32, feed {{{keys[0]!r}: batch.astype(np.float32)}}.)")

  def _warn(self, key, dtype, what):
    if key in self._warned:
      return
    self._warned.add(key)
    logging.warning(
        'feed_dict[%r] %s. Cast it to the dtype the model computes in: '
        "feed_dict={%r: batch.astype(np.%s)} (numpy's floats are float64).",
        key, what, key, dtype.name)


def _some(variables, count=3):
  names = [v.name for v in variables[:count]]
  return ', '.join(names) + (f' and {len(variables) - count} more'
                             if len(variables) > count else '')


@tf.autograph.experimental.do_not_convert  # tfmon's own code: no conversion noise in errors
def _as_output(value, step_name):
  """A step's returned leaf as a traced tensor, or None."""
  if value is None or isinstance(value, tf.Tensor):
    return value
  if isinstance(value, tf.Operation):
    return None  # TF1 returned None for fetched ops
  if is_variable(value):
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
