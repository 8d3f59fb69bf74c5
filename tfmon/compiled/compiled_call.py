"""CompiledCall and CallCompiler: one `run` becomes one traced TensorFlow call.

CallCompiler caches a CompiledCall per call structure (which step functions,
variables and names are fetched, and which feed keys are given), so a steady
training loop traces once per distinct structure, never once per step. Feed
values enter as tensor arguments, so new values never retrace; a feed whose shape
changes relaxes that dimension to None once, as tf.function's reduce_retracing does.
"""

import collections
import functools
import itertools

from tfmon import tf_logging as logging
import numpy as np
import tensorflow as tf
# Internals for calling a traced function without TF's per-call Python (flat_caller).
from tensorflow.python.eager import cancellation
from tensorflow.python.eager import context
from tensorflow.python.eager import execute
from tensorflow.python.eager import record
from tensorflow.python.eager.polymorphic_function import atomic_function

from tfmon.compiled import fetch_plan
from tfmon.compiled import step_increment


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


@functools.cache
def _record_input(record):
  """The `record` input as a cached tensor: made on first use, not at import,
  which would initialize TensorFlow before the caller could configure devices."""
  return tf.constant(record)


def flat_caller(concrete):
  """Returns `call(tensors)`: runs `concrete` on a flat list of input tensors and
  returns its flat output tensors (no None among them).

  `ConcreteFunction._call_flat` spends about half of a small step's call in
  Python: gradient-tape checks, error-interpolation context managers and
  rebuilding the output structure with tf.nest (a 64x64 matmul step: 122 µs a
  call, against 65 µs executing the function as one op; BUILD_NOTES.md). When
  no gradient tape could record and no cancellation scope is active, TensorFlow
  itself runs the function's forward graph as one op; we do that directly,
  interpolating a runtime error's node tracebacks as TensorFlow would, and leave
  the output structure to CompiledCall. Otherwise, or on a TensorFlow version
  without these internals, it goes through `_call_flat`.
  """
  captures = getattr(concrete, '_captured_inputs', None)
  function = getattr(concrete, '_inference_function', None)
  name = getattr(function, 'name', None)
  if captures is None or name is None or not hasattr(record, 'could_possibly_record'):
    return _structured_caller(concrete)
  num_outputs = len(concrete.outputs)
  op_name = name.decode() if isinstance(name, bytes) else name
  # Captured inputs are variable handles and constants, fixed once traced; a
  # capture made by reference (a callable) is read anew at every call.
  fixed_captures = None if any(map(callable, captures)) else concrete.captured_inputs
  ctx = context.context()
  # The context's FunctionCallOptions (replaced when the config changes) and
  # its attrs; holding the object itself, so a new one is never taken for it.
  cached = [None, None]
  fallback = _structured_caller(concrete)

  def call(tensors):
    if record.could_possibly_record() or cancellation.context() is not None:
      return fallback(tensors)
    options = ctx.function_call_options
    if cached[0] is not options:
      cached[:] = options, tuple(itertools.chain(*options.as_attrs().items()))
    attrs = cached[1]
    inputs = tensors + (fixed_captures if fixed_captures is not None
                        else concrete.captured_inputs)
    try:
      return execute.quick_execute(op_name, num_outputs, inputs, attrs, ctx)
    except tf.errors.OpError:
      # Adds where in the user's step the failing op was defined, as TF does.
      with atomic_function.InterpolateRuntimeError(function):
        raise

  return call


def _structured_caller(concrete):
  def call(tensors):
    outputs = concrete._call_flat(tensors, concrete.captured_inputs)  # pylint: disable=protected-access
    return [t for t in tf.nest.flatten(outputs) if t is not None]
  return call


def _unpacker(structured_outputs):
  """Returns a function from a call's flat numpy outputs to what `body` returned.

  The flat outputs of a concrete function are the tensors of its structured
  outputs in tf.nest order, without the Nones.
  """
  if all(isinstance(t, tf.Tensor) for t in structured_outputs):
    return lambda values: values  # the common case: one tensor per output
  present = [t is not None for t in tf.nest.flatten(structured_outputs)]
  template = tf.nest.map_structure(lambda _: None, structured_outputs)

  def unpack(values):
    values = iter(values)
    return _pack(template, [next(values) if p else None for p in present])

  return unpack


class CompiledCall:
  """One call structure's FetchPlan traced into a tf.function.

  Args:
    plan: The FetchPlan of the structure.
  """

  def __init__(self, plan):
    self.plan = plan
    self._fused = plan.loop_leaves is not None
    self._function = tf.function(plan.fused_body if self._fused else plan.body)
    # The global step this call counts or reads (one for the session's life),
    # and the tf.function of the body that also returns it.
    self._global_step = None
    self._reading = None
    # (feed signature: dtype and shape per feed, reads global step) ->
    # (flat caller, unpacker)
    self._callers = {}
    self._graphs = {}      # feed signature -> traced graph
    self._increments = {}  # feed signature -> constant_increment of its graph
    self._specs = None  # the feed specs traced last, relaxed across shapes

  def _caller(self, tensors, signature, reads_global_step=False):
    caller = self._callers.get((signature, reads_global_step))
    return caller or self._trace(tensors, signature, reads_global_step)

  def _trace(self, tensors, signature, reads_global_step):
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in tensors]
    if self._specs is not None:
      relaxed = [old.most_specific_common_supertype([new])
                 for old, new in zip(self._specs, specs)]
      if all(spec is not None for spec in relaxed):
        specs = relaxed
    self._specs = specs
    function = self._function
    if reads_global_step:
      function = self._reading_function()
    try:
      concrete = function.get_concrete_function(*specs)
    except Exception as e:
      if hasattr(e, 'add_note'):  # Python 3.11+
        e.add_note(f'(raised while tracing step functions {self.plan.step_names} '
                   'into the compiled call of run())')
      raise
    caller = flat_caller(concrete), _unpacker(concrete.structured_outputs)
    self._callers[signature, reads_global_step] = caller
    self._graphs.setdefault(signature, concrete.graph)
    return caller

  def _reading_function(self):
    """The plan's body returning, last, the global step as the call left it."""
    if self._reading is None:
      body, global_step = self.plan.body, self._global_step
      # Created after the steps' ops, so automatic control dependencies order
      # the read after their assignments: the post-step value.
      self._reading = tf.function(
          lambda *inputs: body(*inputs) + [global_step.value()])
    return self._reading

  def _increment(self, tensors, signature):
    """What a call of this signature adds to the global step, or None if not constant."""
    if signature not in self._increments:
      self._caller(tensors, signature)  # traces the plain body if need be
      self._increments[signature] = step_increment.constant_increment(
          self._graphs[signature], self._global_step)
    return self._increments[signature]

  def __call__(self, flat_fetches, feed_dict, loop=None, global_step=None,
               value_before=None):
    """Runs the call and returns the flat results as numpy values.

    For a fused plan, `loop` is `(max_steps, target_global_step)`, and the
    return value is `(results, global_step_after, steps_run)`.

    With `global_step` (unfused plans), the return value is `(results,
    global_step_after)`: `value_before` plus the constant the traced call adds to
    the global step, when it adds one and `value_before` is given; otherwise the
    call reads the global step after its steps, as one more output.
    """
    if self.plan.feed_keys:
      tensors = [_feed_tensor(k, feed_dict[k]) for k in self.plan.feed_keys]
      signature = tuple((t.dtype, tuple(t.shape)) for t in tensors)
    else:
      tensors = []
      signature = ()
    for position in self.plan.scalar_positions:
      scalar = flat_fetches[position]
      tensors += [tf.constant(scalar.value, tf.float32),
                  tf.constant(scalar.step, tf.int64)]
    summaries = self.plan.summaries and flat_fetches[self.plan.summaries_position]
    if summaries and not self._fused:  # a fused plan's recording is structure
      tensors.append(_record_input(bool(summaries.record)))
    if self._fused:
      # Loop bounds are inputs, so a run of another length never retraces.
      tensors += [tf.constant(loop[0], tf.int32), tf.constant(loop[1], tf.int64)]
    increment = None
    reads = False  # whether the call returns the global step as its last output
    if global_step is not None:
      if self._global_step is None:
        self._global_step = global_step
      elif global_step is not self._global_step:
        raise RuntimeError(
            f'A compiled call counts one global step; it was given {global_step!r} '
            f'after {self._global_step!r}. Create the global step once, before '
            'the session.')
      if value_before is not None:
        increment = self._increment(tensors, signature)
      reads = increment is None
    call, unpack = self._caller(tensors, signature, reads)
    outputs = unpack([output.numpy() for output in call(tensors)])
    if summaries and summaries.write_graph:
      with summaries.writer.as_default():
        tf.summary.graph(self._graphs[signature])
    results = []
    for position, index in enumerate(self.plan.layout):
      if index >= 0:
        results.append(outputs[index])  # each output converted once, however often fetched
      elif index == fetch_plan.LAYOUT_NONE:
        results.append(None)
      else:
        results.append(_value_to_numpy(flat_fetches[position]))
    if self._fused:
      return results, int(outputs[-2]), int(outputs[-1])
    if global_step is not None:
      return results, int(outputs[-1]) if reads else value_before + increment
    return results


def _pack(structure, flat_results):
  """tf.nest.pack_sequence_as for the nests fetches are made of, on the hot path.

  tf.nest.pack_sequence_as spends ~17us per list or tuple node on a typing-Protocol
  isinstance check (TF 2.21): more than the rest of a hooked run's Python work. This
  packs lists, tuples, namedtuples and dicts in tf.nest's order (dicts by sorted
  key, keeping the caller's key order in the result) and leaves other nests to it.
  """
  return _pack_node(structure, iter(flat_results))


def _pack_node(node, results):
  # A module-level function, not a closure: a recursive closure is a reference
  # cycle, and one per run kept Python's garbage collector busy (BUILD_NOTES.md).
  node_type = type(node)
  if node_type is list:
    return [_pack_node(child, results) for child in node]
  if node_type is tuple:
    return tuple(_pack_node(child, results) for child in node)
  if node_type is dict:
    packed = {key: _pack_node(node[key], results) for key in sorted(node)}
    return {key: packed[key] for key in node}
  if node_type in fetch_plan.LEAF_TYPES:
    return next(results)
  if isinstance(node, tuple) and hasattr(node_type, '_fields'):
    return node_type(*(_pack_node(child, results) for child in node))
  if tf.nest.is_nested(node):
    leaves = [next(results) for _ in tf.nest.flatten(node)]
    return tf.nest.pack_sequence_as(node, leaves)
  return next(results)


class CallCompiler:
  """Runs fetches and feeds as one compiled call, cached by call structure.

  Args:
    jit_compile: Compile step functions with XLA (see FetchPlan).
  """

  # This many distinct function objects of one name traced: likely one per run.
  RETRACE_WARNING_AFTER = 5

  def __init__(self, jit_compile=None):
    self._calls = {}
    self._jit_compile = jit_compile
    self._step_objects = collections.defaultdict(set)  # name -> leaf keys traced

  def run(self, fetches, feed_dict=None):
    """Runs `fetches` with `feed_dict` in one compiled call.

    Args:
      fetches: A nest of fetch leaves (see FetchPlan).
      feed_dict: None or a dict from step-function parameter names to values.

    Returns:
      The results, numpy values in the structure of `fetches`.
    """
    return _pack(fetches, self._run(fetches, feed_dict))

  def run_counting(self, fetches, feed_dict, global_step, value_before):
    """Runs like `run`, and also returns the global step as the call left it.

    Args:
      fetches: A nest of fetch leaves (see FetchPlan).
      feed_dict: None or a dict from step-function parameter names to values.
      global_step: The global step variable.
      value_before: Its value before this call, or None if not known. Given,
        and when the traced call adds a constant to the global step, the value
        after is counted rather than read (see step_increment).

    Returns:
      `(results, global_step_after)`.
    """
    results, global_step_after = self._run(
        fetches, feed_dict, global_step=global_step, value_before=value_before)
    return _pack(fetches, results), global_step_after

  def _run(self, fetches, feed_dict, **counting):
    flat = tf.nest.flatten(fetches)
    feed_keys = tuple(feed_dict) if feed_dict else ()
    call, key = self._call_for(flat, feed_keys, None, None)
    output = call(flat, feed_dict, **counting)
    self._calls[key] = call  # only once it traced and ran: a failed trace retries
    return output

  def run_fused(self, fetches, loop_leaves, max_steps, target_global_step,
                global_step):
    """Runs the step functions of the first `loop_leaves` flat leaves in a loop.

    Args:
      fetches: A nest whose first `loop_leaves` flattened leaves are the
        caller's; the rest (hooks') are computed once, after the loop.
      loop_leaves: How many leading flat leaves form the looped step.
      max_steps: At most this many iterations.
      target_global_step: Stop once the global step reaches this.
      global_step: The global step variable.

    Returns:
      `(results, global_step_after, steps_run)`.
    """
    flat = tf.nest.flatten(fetches)
    call, key = self._call_for(flat, (), loop_leaves, global_step)
    results, global_step_after, steps_run = call(
        flat, None, loop=(max_steps, target_global_step))
    self._calls[key] = call
    return _pack(fetches, results), global_step_after, steps_run

  def _call_for(self, flat, feed_keys, loop_leaves, global_step):
    key = (tuple(map(fetch_plan.leaf_key, flat)), feed_keys, loop_leaves)
    if loop_leaves is not None:  # a fused run records summaries or has none at all
      key += (any(fetch_plan.leaf_kind(leaf) == fetch_plan.SUMMARIES and leaf.record
                  for leaf in flat),)
    call = self._calls.get(key)
    if call is None:
      call = CompiledCall(fetch_plan.FetchPlan(flat, feed_keys, loop_leaves,
                                               global_step, self._jit_compile))
      self._warn_if_steps_are_new_objects(flat)
    return call, key

  def _warn_if_steps_are_new_objects(self, flat):
    """Warns once per name when step functions of one name keep being new objects.

    A step function made anew for every run (`op(lambda: ...)` or a closure
    defined inside the training loop) is a new call structure every run, so every
    run traces again: tens of milliseconds instead of microseconds.
    """
    for leaf in flat:
      kind = fetch_plan.leaf_kind(leaf)
      if kind not in (fetch_plan.STEP, fetch_plan.OP):
        continue
      fn = leaf.fn if kind == fetch_plan.OP else leaf
      name = fetch_plan.describe(fn)
      seen = self._step_objects[name]
      seen.add(fetch_plan.leaf_key(fn))
      if len(seen) == self.RETRACE_WARNING_AFTER:
        logging.warning(
            'run() has traced %d different step functions named %s: a step '
            'function created anew for every run (op(lambda: ...) or a function '
            'defined inside the training loop) makes every run trace again. '
            'Create it once, before the loop.', len(seen), name)
