"""GraphCall: `run` on a captured TF1 graph, as TF1's `Session.run` ran it.

A run's fetches are the graph's tensors, sparse tensors, operations and names
('loss:0', 'train_op'), its variables, and values, in any nest; its feeds are
keyed by placeholders (or any tensor, a sparse one fed its three parts), by
object or by name.

What runs: functions pruned from the graph (`WrappedFunction.prune`), one per
family of runs, as far as TF1's semantics allow:
  - runs that change the same state (the same side-effecting ops among what
    their fetches need: optimizer updates, iterator reads, assignments) and
    feed the same tensors form a family. A hook's `session.run(loss)` changes
    no state that a training run's does not... but not the same state: it is
    its own family, and never trains;
  - a family's function computes the union of what its runs fetch: a run
    that fetches something new (a LoggingTensorHook's loss) prunes the
    family's function again with it, so it costs an output, not a function.
    The union is seeded, when a family's first function is built, with the
    graph tensors the session's hooks hold (`seed`): hooks that become due
    later find their tensors there, and nothing is pruned again for them;
  - v1 summaries, and the ops only they need, run inside a `tf.cond` on the
    function's leading `record` input, true on the runs that fetch them (a
    SummarySaverHook's recording runs): summaries compute on recording runs
    only, as TF1 computed them, and recording runs share the function of the
    runs between. Summaries seed only a training run's family (one that runs
    an operation): a hook's own `session.run(global_step)` never carries the
    model's forward pass for them.

Each tf.data iterator (`make_one_shot_iterator`, `make_initializable_iterator`)
is made once and its resource fed to every function: each pruned function
would otherwise make its own, and a run with other fetches would start the data
over (or read an iterator its initializer never reached). The session's close
releases them.

Feeds are converted to the dtype of the tensor they feed (a float64 numpy
batch fed to a float32 placeholder stays float32, as TF1 did) and checked
against its shape with TF1's message. A fetched variable is read before the
call: its value when the run starts.
"""

import atexit
import difflib
import threading
import weakref

import numpy as np
import tensorflow as tf

from tfmon import checkpoint_files
from tfmon import tf_internals
from tfmon.compiled import fetch_plan
from tfmon.compiled import graph_capture

# The ops that make a tf.data iterator's resource: each is made once, by a
# function of its own, and its handle fed to every function of the session.
ITERATOR_OPS = ('OneShotIterator', 'IteratorV2', 'Iterator', 'MultiDeviceIterator')

# GraphCalls not closed yet: released at exit, while tf.data's threads still run.
_open_calls = weakref.WeakSet()


@atexit.register
def _close_all():
  for call in list(_open_calls):
    call.close()


# What `run` returns for a run of step functions, which the compiler runs. For
# one of step functions and graph elements it returns that call structure's
# `Mixed`, which splits it.
STEP_FUNCTIONS = object()

# How a flat fetch leaf becomes a result.
_OUTPUT, _OPERATION, _VARIABLE, _READ_AFTER, _VALUE, _NONE, _SPARSE = range(7)

# Ops reading a run's data (an iterator's, a queue's next elements).
_DATA_READS = frozenset(['IteratorGetNext', 'IteratorGetNextSync', 'QueueDequeueV2',
                         'QueueDequeueManyV2', 'QueueDequeueUpToV2', 'ReaderReadV2'])

# Stateful ops that change nothing: reading them twice, or once more, is harmless.
_READS = graph_capture.RESOURCE_READS | frozenset(
    ['VarHandleOp', 'Placeholder', 'PlaceholderWithDefault', 'Const'])


class _ReadAfter:
  """A fetch of a variable's value after `assignment`, a graph op, runs."""

  def __init__(self, assignment):
    self.assignment = assignment


class _Function:
  """One pruned function: its outputs, the ops it runs, and how to call it."""

  def __init__(self, call, tensors, operations):
    self.call = call
    self.index = {id(t): i for i, t in enumerate(tensors)}
    self.tensors = tensors
    self.operations = operations
    self.retired = False  # replaced by a function of a larger union
    # Summaries among its outputs: it takes a leading `record` input gating them.
    self.gated = any(_is_summary(t) for t in tensors)
    # Closures giving the call-time values it takes after the feeds (see
    # _call_time_values), set by _function_for.
    self.call_time = ()


class _Family:
  """The function of runs that change the same state with the same feeds."""

  def __init__(self):
    self.function = None


class GraphCall:
  """Runs fetches of one captured graph (a `graph_capture.Graph`).

  Args:
    graph: The graph: finalized by a monitored session before its first run,
      open under a plain `tf.compat.v1.Session`.
    stop_flag: Returns the bool variable that ends a fused loop when true (the
      session's CallCompiler's, which `request_stop_at_step_boundary` sets).
  """

  def __init__(self, graph, stop_flag):
    self.graph = graph
    self._stop_flag = stop_flag
    self._plans = {}     # (leaf keys, fed tensor names) -> _Plan
    self._families = {}  # (side-effecting op ids, fed names) -> _Family
    self._seeds = []     # graph tensors the session's hooks hold
    self._iterators = None  # iterators' handles: [(tensor, handle)]
    self._keep = []      # what must live as long as those handles
    self._releases = []  # unregister the functions made by TF's C API
    self._ops = {id(op): op for op in graph.get_operations()}
    _refuse_other_jobs(self._ops.values())
    self._loops = {}  # the loop leaves' keys -> a fused run's loop, or None
    with tf.init_scope():  # a gated function's `record` input (see _prune)
      self._record = {False: tf.constant(False), True: tf.constant(True)}
    _open_calls.add(self)
    self.functions_built = 0
    self._building = threading.Lock()  # held while a function is found or built

  def close(self):
    """Releases the functions and the iterators' resources made for the runs.

    An iterator resource whose handle lives until the interpreter exits is
    destroyed after tf.data's threads are gone, and its destructor then waits
    for them forever: the process hangs at exit. So handles are released when
    the session closes, and at exit for a session never closed.
    """
    self._plans.clear()
    self._families.clear()
    self._loops.clear()
    self._keep.clear()
    for release in self._releases:
      release()
    self._releases.clear()
    self._iterators = None
    _open_calls.discard(self)

  def seed(self, tensors):
    """Tensors later runs may fetch: a family's first function outputs those it
    computes anyway (see the module doc)."""
    known = {id(t) for t in self._seeds}
    for tensor in tensors:
      if (isinstance(tensor, tf.Tensor) and getattr(tensor, 'graph', None) is self.graph
          and id(tensor) not in known and tensor.dtype != tf.resource):
        known.add(id(tensor))
        self._seeds.append(tensor)

  def run(self, fetches, feed_dict=None):
    """Runs `fetches` with `feed_dict`; returns numpy results shaped as `fetches`."""
    flat = fetch_plan.flatten(fetches)
    key = (tuple(_leaf_key(leaf) for leaf in flat),
           tuple(_leaf_key(k) for k in feed_dict) if feed_dict else ())
    plan = self._plans.get(key)
    if plan is None:
      plan = self._plans[key] = self._plan(flat, feed_dict)
    if plan is STEP_FUNCTIONS or isinstance(plan, Mixed):
      return plan
    feeds = self._feeds(plan, feed_dict) if feed_dict else []
    function = plan.function
    if (function is None and (plan.tensors or plan.operations)) or (
        function is not None and function.retired):
      # One thread builds, the others find its function: a queue runner's
      # threads all run the same enqueue op at once.
      with self._building:
        function = plan.function = self._function_for(plan, [t for t, _ in feeds])
    before = [leaf.numpy() if kind == _VARIABLE else None
              for leaf, kind in zip(flat, plan.kinds)]
    outputs = None
    if function is not None:
      inputs = [value for _, value in feeds]
      for closure in function.call_time:
        inputs += closure()
      inputs += [h for _, h in self._iterators]
      if function.gated:
        inputs.insert(0, self._record[plan.records])
      try:
        outputs = function.call(inputs)
      except tf.errors.NotFoundError as e:
        _refuse_a_tf2_checkpoint_to_a_tf1_saver(feeds, e)
        raise
    results = []
    for leaf, kind, element, value in zip(flat, plan.kinds, plan.elements, before):
      if kind == _OUTPUT:
        results.append(outputs[function.index[id(element)]].numpy())
      elif kind == _SPARSE:  # a SparseTensorValue, as TF1 fetched it
        results.append(tf.compat.v1.SparseTensorValue(
            *(outputs[function.index[id(t)]].numpy() for t in _parts(element))))
      elif kind == _VARIABLE:
        results.append(value)
      elif kind == _READ_AFTER:
        results.append(leaf.numpy())
      elif kind == _VALUE:
        results.append(leaf.numpy() if isinstance(leaf, tf.Tensor) else np.asarray(leaf))
      else:
        results.append(None)
    return fetch_plan.pack(fetches, results)

  def owns(self, leaf):
    """Whether `leaf` is an element of this graph (or a name in it)."""
    if isinstance(leaf, (tf.Tensor, tf.Operation)):
      return getattr(leaf, 'graph', None) is self.graph
    return isinstance(leaf, str) and self._element(leaf, must=False) is not None

  def can_fuse(self, leaves):
    """Whether these flat leaves (a run's own fetches) fetch this graph's elements."""
    return any(isinstance(leaf, (tf.Tensor, tf.Operation, str)) and self.owns(leaf)
               for leaf in leaves)

  def run_loop(self, fetches, loop_leaves, max_steps, target_global_step, global_step):
    """Runs up to `max_steps - 1` steps of the first `loop_leaves` flat fetches
    in one loop of the function pruned for them, stopping a step before the
    global step reaches `target_global_step`; returns how many ran. The caller
    makes the last step an ordinary run of every fetch."""
    if max_steps <= 1:
      return 0
    flat = fetch_plan.flatten(fetches)[:loop_leaves]
    loop = self._loop_for(tuple(_leaf_key(leaf) for leaf in flat), flat, global_step)
    if loop is None:
      return 0
    loop, call_time = loop
    inputs = [value for closure in call_time for value in closure()]
    return int(loop(tf.constant(max_steps - 1, tf.int32),
                    tf.constant(target_global_step, tf.int64),
                    *inputs, *[handle for _, handle in self._iterators]))

  def _loop_for(self, key, leaves, global_step):
    """`(a tf.function looping over the steps of a run of `leaves`, the
    closures of its call-time inputs)`, made once; or None."""
    loop = self._loops.get(key)
    if loop is not None or key in self._loops:
      return loop
    plan = self._plan(leaves, None)
    if not isinstance(plan, _Plan) or plan.kinds.count(_VARIABLE) or not (
        plan.tensors or plan.operations):
      self._loops[key] = None
      return None
    if self._iterators is None:
      self._iterators = self._make_iterators()
    # Call-time values (collectives' instance keys) are taken once a loop, as
    # a tf.function's loop takes them.
    call_time = self._call_time_values(plan.tensors + plan.operations,
                                       {id(t.op) for t, _ in self._iterators})
    call_time_inputs = [p for ps, _ in call_time for p in ps]
    step = self.graph.wrapped_function().prune(
        call_time_inputs + [t for t, _ in self._iterators], plan.tensors + plan.operations)
    self._keep.append(step)
    stop = self._stop_flag()  # the compiler's: a stop request ends either loop
    read_step = lambda: tf.cast(global_step.read_value(), tf.int64)

    def fused(count, target, *inputs):
      def condition(i):
        # Stop a step short of the target: the last step is the full run.
        return tf.logical_and(tf.logical_and(i < count, read_step() + 1 < target),
                              tf.logical_not(stop.read_value()))

      def body(i):
        step(*inputs)
        return i + 1  # automatic control dependencies run the call first

      return tf.while_loop(condition, body, [tf.constant(0)], parallel_iterations=1)[0]

    specs = [tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64)] + _specs(
        call_time_inputs) + [tf.TensorSpec([], tf.resource) for _ in self._iterators]
    with tf.init_scope():
      loop = tf.function(fused, autograph=False).get_concrete_function(*specs)
    self.functions_built += 1
    self._loops[key] = loop, [closure for _, closure in call_time]
    return self._loops[key]

  def _plan(self, flat, feed_dict):
    steps = [leaf for leaf in flat
             if fetch_plan.leaf_kind(leaf) in (fetch_plan.STEP, fetch_plan.OP)]
    if not steps:
      return _Plan(flat, [self._fetch_element(leaf) for leaf in flat])
    leaves = [self._is_graph_leaf(leaf) for leaf in flat]
    feeds = [self._is_graph_feed(key) for key in feed_dict or ()]
    if any(leaves) or any(feeds):
      return Mixed(leaves, feeds)
    return STEP_FUNCTIONS

  def _is_graph_leaf(self, leaf):
    return fetch_plan.leaf_kind(leaf) not in (fetch_plan.STEP, fetch_plan.OP) and (
        not isinstance(leaf, str) or self.owns(leaf))

  def _is_graph_feed(self, key):
    return not isinstance(key, str) or self._element(key, must=False) is not None

  def _function_for(self, plan, fed):
    """The function to run `plan`'s fetches with `fed` (see the module doc)."""
    if not self.graph.finalized:  # a plain Session's graph grows between runs
      self.graph.prepare_for_runs()
      self._ops = {id(op): op for op in self.graph.get_operations()}
    if self._iterators is None:
      self._iterators = self._make_iterators()
    stops = {id(t.op) for t in fed} | {id(t.op) for t, _ in self._iterators}
    # Summaries compute on recording runs only: what they change is no part of
    # the state a family shares.
    effects = _effects([t for t in plan.tensors if not _is_summary(t)] + plan.operations,
                       stops, self._ops)
    family = self._families.setdefault(
        (effects, tuple(t.name for t in fed)), _Family())
    current = family.function
    if current is not None and _computes(current, plan.tensors, plan.operations):
      return current
    tensors, operations = list(plan.tensors), list(plan.operations)
    if current is not None:  # the run needs more: its fetches join the union
      current.retired = True  # plans holding it look again
      tensors += current.tensors
      operations += current.operations
    else:  # the family's first function: seeded with what hooks hold
      trains = bool(plan.operations)
      tensors += [t for t in self._seeds if self._can_join(t, effects, stops, trains)]
    tensors, operations = _unique(tensors), _unique(operations)
    call_time = self._call_time_values(tensors + operations, stops)
    family.function = self._prune(list(fed) + [p for ps, _ in call_time for p in ps],
                                  tensors, operations, stops)
    family.function.call_time = [closure for _, closure in call_time]
    return family.function

  def _call_time_values(self, elements, stops):
    """`[(placeholders, closure)]` of the graph's call-time captures computing
    `elements` needs, which `prune` drops: a strategy's collective ops take
    their instance keys so, a new one each call (`closure()`), as a
    tf.function's call computes them."""
    captures = tf_internals.deferred_captures(self.graph)
    if not captures:
      return []
    needed = _needed_ops(elements, stops)
    return [(placeholders, closure) for placeholders, closure in captures
            if any(id(p.op) in needed for p in placeholders)]

  def _can_join(self, tensor, effects, stops, trains):
    """Whether the first function of a family of `effects` may compute `tensor`
    (a seed): it changes no other state, needs no placeholder the family does
    not feed, and is no summary unless the family's run trains on the data the
    summary reads."""
    if _is_summary(tensor):
      # A training run's: the data they read must be what the family reads (an
      # iterator's initializer runs an operation too, and reads no data).
      reads = {i for i in _effects([tensor], stops, self._ops)
               if self._ops[i].type in _DATA_READS}
      if not (trains and reads <= effects):
        return False
    elif not _effects([tensor], stops, self._ops) <= effects:
      return False
    captures = self.graph.captured_placeholder_ids()
    return not any(op.type == 'Placeholder' and i not in captures
                   for i, op in _needed_ops([tensor], stops).items())

  def _prune(self, fed, tensors, operations, stops):
    """A function computing `tensors` and running `operations` from `fed` and
    the iterators' handles. Summaries among the tensors, and the ops only they
    need, run in a `tf.cond` on a leading `record` input (see the module doc):
    `main`, pruned without them, outputs what they read too (their frontier),
    and `gate`, pruned from that frontier, computes them when recording.
    (`prune` from tensors inside a graph also copies, unconnected, the ops that
    compute them; TF drops those when it instantiates the function, as it does
    any side effect a traced function does not list: tested.)

    Measured against a function for the recording runs and another for the
    runs between: the same step time between recordings (BUILD_NOTES.md,
    "TF1 graph mode").
    """
    sources = list(fed) + [t for t, _ in self._iterators]
    wrapped = self.graph.wrapped_function()
    summaries = [t for t in tensors if _is_summary(t)]
    rest = [t for t in tensors if not _is_summary(t)]
    self.functions_built += 1
    if not summaries and rest:
      # Made from the graph itself by TensorFlow's C API: no op is copied.
      made = tf_internals.graph_function_caller(
          self.graph, sources, rest, operations,
          _needed_ops(rest + operations, {id(t.op) for t in sources}))
      if made is not None:
        call, release = made
        self._releases.append(release)
        return _Function(call, rest, operations)
    if not summaries:
      pruned = _pruned(wrapped, sources, rest + operations)
      self._keep.append(pruned)
      if not rest:  # see _with_an_output
        pruned = _with_an_output(pruned, sources)
        self._keep.append(pruned)
      return _Function(tf_internals.flat_caller(pruned), rest, operations)
    always = _needed_ops(rest + operations, stops)
    captures = self.graph.captured_placeholder_ids()
    only_summaries = {i: op for i, op in _needed_ops(summaries, stops).items()
                      if i not in always}
    # Variable reads stay ungated: a summary of a weight reads it with the step.
    # Not a read after what only summaries run (what a v1 metric's update op
    # returns, the read after its `assign_add`): ungated, it would run that
    # update, and read the data it needs, on every run.
    gated = {i: op for i, op in only_summaries.items()
             if op.type != 'ReadVariableOp' or any(
                 id(parent) in only_summaries and id(parent) not in captures
                 for parent in graph_capture.parents(op))}
    frontier = _unique([t for op in gated.values() for t in op.inputs
                        if id(t.op) not in gated and id(t.op) not in captures])
    # `prune` copies (unconnected) the ops above its sources too, and fails on
    # one that reads an output of a source's op which is no source itself: the
    # labels of an IteratorGetNext whose images an image summary reads, read by
    # the loss a scalar summary reads. So every output of such an op is one.
    frontier = _unique([output for t in frontier for output in t.op.outputs])
    source_index = {id(t): i for i, t in enumerate(sources)}
    computed = [t for t in frontier if id(t) not in source_index]
    main = _pruned(wrapped, sources, rest + computed + operations)
    gate = _pruned(wrapped, frontier, summaries)

    def step(record, *inputs):
      # Traced without automatic control dependencies (_calling): those would
      # order the cond after all of `main` (`gate` captures the variables'
      # handles), where the summaries now start once what they read is computed
      # (a CIFAR-10 recording step 0.02-0.03 s sooner).
      outputs = main(*inputs) or []
      values = dict(zip(map(id, computed), outputs[len(rest):]))
      given = [inputs[source_index[id(t)]] if id(t) in source_index else values[id(t)]
               for t in frontier]
      recorded = tf.cond(record, lambda: gate(*given),
                         lambda: [tf.constant(b'') for _ in summaries])
      return list(outputs[:len(rest)]) + list(recorded)

    concrete = _calling(step, [tf.TensorSpec([], tf.bool)] + _specs(sources))
    self._keep += [main, gate, concrete]
    return _Function(tf_internals.flat_caller(concrete), rest + summaries, operations)

  def _make_iterators(self):
    """Each iterator's resource, made once (see the module doc).

    Made by a function of its own, not found by a shared name: a resource in
    TensorFlow's resource manager outlives the session, and an iterator
    destroyed when the interpreter exits waits forever for tf.data's threads.
    """
    iterators = []
    for op in self.graph.get_operations():
      if op.type in ITERATOR_OPS:
        maker = self.graph.wrapped_function().prune([], [op.outputs[0]])
        self._keep.append(maker)
        iterators.append((op.outputs[0], maker()[0]))
    return iterators

  def _fetch_element(self, leaf):
    """The graph element, variable, value or None that `leaf` fetches."""
    # What graph code's `assign_add(v, 1)` returns: a read of the variable
    # after its assignment (an `_UnreadVariable`): the assignment runs, and
    # its value is read after the call, as TF1 fetched it.
    assignment = tf_internals.write_of(leaf)
    if assignment is not None and assignment.graph is self.graph:
      return _ReadAfter(assignment)
    if leaf is None or fetch_plan.is_variable(leaf):
      return leaf
    if isinstance(leaf, (tf.Tensor, tf.Operation, tf.SparseTensor)):
      if not tf.is_symbolic_tensor(leaf) and isinstance(leaf, tf.Tensor):
        return leaf  # an eager value
      if leaf.graph is not self.graph:
        raise ValueError(
            f'Fetch {leaf!r} is an element of another graph than the one this '
            'session runs. Build it inside the same `with tfmon.Graph().as_default():` '
            'block as the session.')
      return leaf
    if isinstance(leaf, str):
      return self._element(leaf, must=True)
    if isinstance(leaf, (np.ndarray, np.generic, int, float, bool)):
      return np.asarray(leaf)
    raise TypeError(
        f'Fetch {leaf!r} of type {type(leaf).__name__} is not an element of the '
        'graph: fetch tensors, sparse tensors, operations, their names, variables '
        'or nests of them.')

  def _element(self, name, must):
    try:
      return self.graph.as_graph_element(name)
    except (KeyError, ValueError) as e:
      if not must:
        return None
      names = [op.name for op in self.graph.get_operations()]
      nearest = difflib.get_close_matches(name.split(':')[0], names, n=3)
      raise ValueError(
          f'Fetch name {name!r} names nothing in the graph ({e}). Nearest '
          f'names: {nearest}. Name a tensor as `op_name:0` or an operation by '
          'its name.') from None

  def _feeds(self, plan, feed_dict):
    """`[(fed tensor, value tensor)]` in a fixed order (by the tensor's name).

    The fed tensors, their order and specs are the plan's (its key holds the
    feed keys in order), found at its first run: a run converts and checks
    values only.
    """
    if plan.feeds is None:
      # (index in feed_dict, part of a sparse key or None, tensor, the
      # `(replica, replicas)` whose share of the value it takes, or None)
      fed = []
      for i, key in enumerate(feed_dict):
        if isinstance(key, tf.SparseTensor):  # fed its three parts, as TF1 did
          fed += [(i, part, self._fed_tensor(t), None)
                  for part, t in enumerate(_parts(key))]
          continue
        tensor = self._fed_tensor(key)
        replicas = self.graph.replica_feeds.get(id(tensor))  # see graph_replicas
        if replicas:
          fed += [(i, None, t, (r, len(replicas))) for r, t in enumerate(replicas)]
        else:
          fed.append((i, None, tensor, None))
      plan.feeds = [(i, part, t, t.dtype, t.shape, share)
                    for i, part, t, share in sorted(fed, key=lambda f: f[2].name)]
    values = list(feed_dict.values())  # keys: graph tensors, unhashable here
    feeds = []
    for i, part, tensor, dtype, shape, share in plan.feeds:
      given = values[i] if part is None else _sparse_part(values[i], part, tensor)
      if share is not None:
        given = _share_of(given, *share, tensor)
      try:
        value = tf.convert_to_tensor(given, dtype=dtype)
      except (TypeError, ValueError) as e:
        raise TypeError(f'Cannot feed {given!r} to {tensor.name} of dtype '
                        f'{dtype.name}: {e}') from None
      if not shape.is_compatible_with(value.shape):
        raise ValueError(
            f'Cannot feed value of shape {tuple(value.shape.as_list())} for Tensor '
            f'{tensor.name!r}, which has shape {shape}')
      feeds.append((tensor, value))
    return feeds

  def _fed_tensor(self, key):
    tensor = self._element(key, must=True) if isinstance(key, str) else key
    if not isinstance(tensor, tf.Tensor) or getattr(tensor, 'graph', None) is not self.graph:
      raise TypeError(
          f'feed_dict key {key!r} is not a tensor of the graph this session runs: '
          'key feeds by the placeholder (or its name, e.g. "x:0").')
    return tensor


def _refuse_other_jobs(ops):
  """Refuses a graph placed on other processes' devices (a job and task no
  local device has): TF1's between-graph replication (`replica_device_setter`
  putting variables on '/job:ps')."""
  local = {('localhost', 0)} | {(spec.job, spec.task or 0) for spec in (
      tf.DeviceSpec.from_string(d.name) for d in tf.config.list_logical_devices())}
  for op in ops:
    spec = tf.DeviceSpec.from_string(op.device or '')
    if spec.job is not None and (spec.job, spec.task or 0) not in local:
      raise ValueError(
          f'Operation {op.name!r} of this graph is placed on {op.device!r}: TF1\'s '
          'between-graph replication (parameter servers, replica_device_setter, '
          'a session on a remote master). A captured graph runs in this process. '
          'Train on several processes with tf.distribute.MultiWorkerMirroredStrategy '
          'and a step function (docs/distribution.md), or run this script in TF1\'s '
          'own graph mode (tf.Graph and tf.compat.v1 sessions), which still has '
          'parameter servers.')


class Mixed:
  """A call structure of step functions and graph elements: which flat fetches
  and which feeds are the graph's, found at its first run."""

  def __init__(self, leaves, feeds):
    self._leaves = leaves
    self._feeds = feeds

  def split(self, fetches, feed_dict):
    """`(graph part, step part, merge)` of a run: each part a `(flat fetches,
    feed_dict)`; `merge(graph results, step results)` gives the run's results.
    The graph part runs first (a hook's step function then sees what the
    training run did)."""
    flat = fetch_plan.flatten(fetches)
    graph_feeds, step_feeds = {}, {}
    for mine, (key, value) in zip(self._feeds, (feed_dict or {}).items()):
      (graph_feeds if mine else step_feeds)[key] = value

    def merge(graph_results, step_results):
      graph_results, step_results = iter(graph_results), iter(step_results)
      return fetch_plan.pack(fetches, [
          next(graph_results) if mine else next(step_results) for mine in self._leaves])

    return (([l for l, mine in zip(flat, self._leaves) if mine], graph_feeds or None),
            ([l for l, mine in zip(flat, self._leaves) if not mine], step_feeds or None),
            merge)


def _leaf_key(leaf):
  if isinstance(leaf, (str, type(None))):
    return leaf
  return id(leaf)


class _Plan:
  """What one call structure fetches: per leaf its kind and graph element."""

  def __init__(self, flat, elements):
    self.elements = elements
    self.kinds = []
    self.tensors, self.operations = [], []
    for element in elements:
      if isinstance(element, tf.Tensor) and tf.is_symbolic_tensor(element):
        self.kinds.append(_OUTPUT)
        self.tensors.append(element)
      elif isinstance(element, tf.Operation):
        self.kinds.append(_OPERATION)
        self.operations.append(element)
      elif isinstance(element, tf.SparseTensor):
        self.kinds.append(_SPARSE)
        self.tensors += _parts(element)
      elif isinstance(element, _ReadAfter):
        self.kinds.append(_READ_AFTER)
        self.operations.append(element.assignment)
      elif element is None:
        self.kinds.append(_NONE)
      elif fetch_plan.is_variable(element):
        self.kinds.append(_VARIABLE)
      else:
        self.kinds.append(_VALUE)
    self.records = any(_is_summary(t) for t in self.tensors)
    self.function = None
    self.feeds = None  # [(index in feed_dict, part, fed tensor, dtype, shape, share)]: see _feeds


def _refuse_a_tf2_checkpoint_to_a_tf1_saver(feeds, error):
  """Raises ValueError, with the fixes, if `error` is a TF1 Saver's restore op
  (fed its file name) not finding its keys in a TF2 checkpoint (tfmon's own).

  TF1's `Saver.restore` catches the NotFoundError and rebuilds itself for an
  object-based checkpoint, which a finalized graph refuses: "Graph is finalized
  and cannot be modified" would say nothing of the cause.
  """
  if 'not found in checkpoint' not in str(error):
    return
  for tensor, value in feeds:
    if tensor.dtype != tf.string or value.shape.rank != 0:
      continue
    path = value.numpy().decode(errors='replace')
    try:
      object_based = not checkpoint_files.is_tf1_checkpoint(path)
    except (tf.errors.OpError, ValueError):
      continue
    if object_based:
      raise ValueError(
          f'TF1\'s Saver cannot restore {path} through a session of a captured graph: '
          'it is a TF2 (object-based) checkpoint, as tfmon writes them, which TF1\'s '
          'Saver restores only by building new ops, and the graph is finalized. '
          'Let the session restore it: pass the Saver as '
          'tfmon.train.Scaffold(saver=...) and the directory as checkpoint_dir; or '
          'restore it with TF1\'s Saver in a plain tf.compat.v1.Session.') from error


def _parts(sparse):
  return [sparse.indices, sparse.values, sparse.dense_shape]


def _share_of(value, replica, replicas, tensor):
  """Replica `replica`'s share of a value fed to a placeholder each of
  `replicas` replicas has: its rows split as evenly as they go."""
  value = value.numpy() if isinstance(value, tf.Tensor) else np.asarray(value)
  if value.ndim == 0 or len(value) < replicas:
    raise ValueError(
        f'Cannot feed a value of shape {value.shape} to {tensor.name}, a placeholder '
        f'of each of {replicas} replicas: feed a batch of at least {replicas} rows, '
        'which the replicas share.')
  return np.array_split(value, replicas)[replica]


def _sparse_part(value, part, tensor):
  """Part `part` (indices, values, dense_shape) of a value fed to a sparse
  tensor: a `SparseTensorValue`, a `tf.SparseTensor` or a 3-tuple, as TF1 took."""
  if isinstance(value, (tf.compat.v1.SparseTensorValue, tf.SparseTensor)):
    return _parts(value)[part]
  if isinstance(value, (tuple, list)) and len(value) == 3:
    return value[part]
  raise TypeError(
      f'Cannot feed {value!r} to the sparse tensor of {tensor.name}: feed a '
      'tf.compat.v1.SparseTensorValue(indices, values, dense_shape) or a tuple '
      'of those three.')


def _specs(tensors):
  return [tf.TensorSpec(t.shape, t.dtype) for t in tensors]


def _calling(body, specs):
  """`body`, which calls functions, traced into a function of `specs`.

  Traced by `wrap_function`, without automatic control dependencies: each call
  runs when its inputs are ready, and is listed as what the function must run.
  """
  def traced(*inputs):
    outputs = body(*inputs)
    graph = tf.compat.v1.get_default_graph()
    graph.control_outputs.extend(op for op in graph.get_operations()
                                 if op.type in ('StatefulPartitionedCall', 'PartitionedCall'))
    return outputs

  with tf.init_scope():
    return tf.compat.v1.wrap_function(traced, specs)


def _with_an_output(pruned, sources):
  """`pruned`, a function that only runs operations, called by one that also
  outputs a constant.

  Grappler takes a function's outputs for what it must compute. With none it
  knows nothing it may drop, and keeps what TF1's `Session.run(train_op)`
  dropped: the gradients' `tuple` groups hold every gradient op's outputs
  together, so the CIFAR-10 tutorial computed conv1's gradient with respect to
  its input images too, a step 1.18x TF1's time (BUILD_NOTES.md, "Grappler
  prunes a function by its outputs"). With an output, the same kernels run as
  under TF1 (tested).
  """
  def call(*inputs):
    pruned(*inputs)
    return tf.constant(True)

  return _calling(call, _specs(sources))


def _pruned(wrapped, sources, fetches):
  """`wrapped.prune(sources, fetches)`, copying only the ops the fetches need
  (see tf_internals.prune)."""
  return tf_internals.prune(wrapped, sources, fetches,
                            _needed_ops(fetches, {id(t.op) for t in sources}))


def _needed_ops(elements, stops):
  """`{id: op}` of every op that computing `elements` runs, fed ops excluded."""
  needed = {}
  pending = [e if isinstance(e, tf.Operation) else e.op for e in elements]
  while pending:
    op = pending.pop()
    if id(op) in needed or id(op) in stops:
      continue
    needed[id(op)] = op
    pending.extend(t.op for t in op.inputs)
    pending.extend(op.control_inputs)
  return needed


def _is_summary(tensor):
  """Whether `tensor` is a v1 summary (a serialized Summary proto)."""
  return tensor.dtype == tf.string and tensor.op.type.endswith('Summary')


def _computes(function, tensors, operations):
  """Whether `function` computes `tensors` and runs `operations`."""
  return all(id(t) in function.index for t in tensors) and all(
      any(op is o for o in function.operations) for op in operations)


def _effects(elements, stops, ops):
  """The ids of the state-changing ops that computing `elements` runs."""
  return frozenset(i for i in _needed_ops(elements, stops) if _changes_state(ops[i]))


def _unique(items):
  return list({id(item): item for item in items}.values())


def _changes_state(op):
  return op.type not in _READS and op.op_def is not None and op.op_def.is_stateful
