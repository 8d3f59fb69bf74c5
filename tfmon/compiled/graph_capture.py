"""Graph: TF1 graph code, captured as it is built, for a session to run.

The other way a session's function is made (StepGraph traces a step function):
inside `with tfmon.Graph().as_default():` TF1 code builds its graph unchanged
(placeholders, `get_variable`, v1 layers, optimizers, metrics and summaries,
collections), and a tfmon session created there runs it (GraphCall).

What the capture promises:
  - the graph is a `FuncGraph`: an op that uses an eager tensor captures it;
  - every variable is an eager variable, made when the graph code creates it
    (a variable creator runs its initializer under `init_scope`), named as TF1
    named it, and listed in the graph's collections (`global_variables()`,
    `trainable_variables()`, LOCAL_VARIABLES for v1 metrics), so v1 optimizers
    find what to train and checkpoints find what to save; with a graph seed
    (`tf.compat.v1.set_random_seed`) its initial value is TF1's
    (_initial_value_as_tf1);
  - a session finalizes the graph after its hooks' `begin()`, as TF1 did, and
    runs subgraphs of it as pruned functions (`WrappedFunction.prune`).
"""

import contextlib
import functools
import importlib
import importlib.util
import itertools
import os
import types
import threading
import warnings

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import variable_pb2

from tfmon import tf_internals



_graph_numbers = itertools.count()
_tf1_behaviour = []  # TF made to behave as TF1 in captured graphs, once


class Graph(tf_internals.FuncGraph):
  """A drop-in for `tf.Graph` whose TF1 code a tfmon session runs eagerly.

  Use it as TF1 used its graph: `with tfmon.Graph().as_default():` around the
  graph code and the session. See the module doc.
  """

  def __init__(self, name='tfmon_graph'):
    require_eager_runtime()
    super().__init__(name, collections={})
    self._variable_holder = tf_internals.VariableHolder(share_variables=False)
    self._wrapped = None
    self._entered = 0
    # Unique in the process, unlike id(): a shared resource of a graph gone
    # lives on in TensorFlow's resource manager, and must not be found by a
    # later graph's op of the same name.
    self._number = next(_graph_numbers)
    self._maybe_updates = []  # conds made in Keras layers' calls
    self._prepared = 0  # how many ops prepare_for_runs has seen
    # Built once per replica of a strategy (graph_replicas.capture_graph): the
    # strategy, and `{id(replica 0's placeholder): every replica's}`, whose
    # feeds GraphCall splits.
    self.strategy = None
    self.replica_feeds = {}

  @contextlib.contextmanager
  def as_default(self):
    _route_v1_layers_to_tf_keras()  # at every entry: see there
    if not _tf1_behaviour:  # once per process
      _tf1_behaviour.append(True)
      _average_tensors_as_tf1_did()
      tf_internals.let_queues_of_captured_graphs_be_named()
      tf_internals.let_one_shot_iterators_capture_dummy_dataset_resources()
    # One creator however deeply entered (TF1 code re-enters its graph).
    creator = contextlib.nullcontext() if self._entered else self._creators()
    self._entered += 1
    try:
      with super().as_default(), creator, warnings.catch_warnings(), \
          _tf1_tensor_equality():
        # A v1 summary op built here is what we want (a v1 Summary proto); TF
        # warns that it found no TF2 writer to forward it to.
        warnings.filterwarnings('ignore', message='Cannot activate TF2 compatibility')
        yield self
    finally:
      self._entered -= 1

  def _create_op_internal(self, op_type, *args, **kwargs):  # pylint: disable=arguments-differ
    op = super()._create_op_internal(op_type, *args, **kwargs)
    if op_type in _KERAS_UPDATES and tf_internals.in_tf_keras_layer_call():
      # TF2's Keras layers run their updates (batch norm's moving statistics)
      # where they make them, counting on a function's automatic control
      # dependencies; TF1 code runs them through UPDATE_OPS, as TF1's layers
      # collected them there. A cond (`training` a tensor) is one if it
      # writes a variable, which it says once built: see get_collection.
      if op_type in _VARIABLE_UPDATES:
        self.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, op)
      else:
        self._maybe_updates.append(op)
    return op

  def get_collection(self, name, scope=None):
    if name == tf.compat.v1.GraphKeys.UPDATE_OPS and self._maybe_updates:
      self._collect_cond_updates()
    return super().get_collection(name, scope)

  def get_collection_ref(self, name):
    if name == tf.compat.v1.GraphKeys.UPDATE_OPS and self._maybe_updates:
      self._collect_cond_updates()
    return super().get_collection_ref(name)

  def _collect_cond_updates(self):
    """Adds to UPDATE_OPS the conds made in Keras layers' calls that write a
    variable (the resource inputs not listed as read-only)."""
    conds, self._maybe_updates = self._maybe_updates, []
    for op in conds:
      try:
        read_only = set(op.get_attr('_read_only_resource_inputs'))
      except ValueError:
        read_only = set()
      if any(t.dtype == tf.resource and i not in read_only
             for i, t in enumerate(op.inputs)):
        # What computes its outputs (cond_v2's identities), as TF1 collected
        # it: a lowered cond whose outputs nothing needs runs no branch.
        outputs = [c for t in op.outputs for c in t.consumers()]
        for update in outputs or [op]:
          super().add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, update)

  def graph_mode(self):
    """Graph mode on this graph, as `as_default()`; when the graph is the
    default already (a running session's, under `init_scope`), only graph
    mode is switched on: 1.4 µs where `as_default()` takes 12 (TF1 hooks'
    per-run callbacks run in it)."""
    if tf.compat.v1.get_default_graph() is self:
      return tf_internals.graph_mode()
    return self.as_default()

  @contextlib.contextmanager
  def _creators(self):
    """The graph's variable creators: `_create_variable`, and around a
    strategy's creator `_list_distributed`.

    Under a strategy's scope entered before the graph, `_create_variable` runs
    after the strategy's creator (a lower priority), as when the scope is
    entered inside: the strategy asks it for each replica's variable. Run
    before, it listed each distributed variable twice in the collections (v1
    `minimize` applied every gradient twice) and read a distributed variable's
    handle outside a replica (a v1 optimizer's slots).
    """
    main = (tf_internals.variable_creator_scope(self._create_variable, priority=50)
            if tf.distribute.has_strategy() else
            tf.variable_creator_scope(self._create_variable))
    with main, tf_internals.variable_creator_scope(self._list_distributed, priority=200):
      yield

  def _list_distributed(self, next_creator, **kwargs):
    """Lists in the graph's collections a distributed variable made eagerly
    (under `init_scope`: a v1 optimizer's slots), in place of its replicas'
    variables: a strategy lists only those made in graph code, so TF1's Saver
    and tfmon's checkpoints missed Adam's slots."""
    variable = next_creator(**kwargs)
    if (not isinstance(variable, tf.distribute.DistributedValues) or
        not tf.executing_eagerly() or not self._builds_here() or
        self._sessions_own()):
      return variable
    components = {id(v) for v in variable.values}
    for key in self.collections:
      listed = self.get_collection_ref(key)
      listed[:] = [v for v in listed if id(v) not in components]
    collections = list(kwargs.get('collections') or [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES])
    if variable.trainable and tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES not in collections:
      collections.append(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    self.add_to_collections(collections, variable)
    return variable

  def _sessions_own(self):
    """Whether a variable made now is a session's on this graph (eager, or
    traced in its functions), not the graph code's."""
    return getattr(_running, 'graph', None) is self and (
        tf.executing_eagerly() or tf.compat.v1.get_default_graph() is not self)

  def _create_variable(self, next_creator, **kwargs):
    """Makes a variable of the graph code eager, in the graph's collections,
    and gives it `.op` and `.graph`, as TF1's had.

    TF1 code and hooks read `variable.op.name` and `variable.graph`, which an
    eager variable refuses: they are those of its handle captured in this
    graph. Variables a session on the graph makes while it runs (a
    checkpoint's save counter) are left alone.
    """
    if self._sessions_own():
      return next_creator(**kwargs)
    if not self._builds_here():
      # A graph entered inside another inherits its creators (an Estimator's
      # evaluation during training): each graph makes its own variables.
      return next_creator(**kwargs)
    in_graph_code = not tf.executing_eagerly()
    if 'use_resource' in kwargs:
      # TF1 code's reference variables (`use_resource=False`,
      # `disable_resource_variables()`): eager variables are resource ones.
      kwargs['use_resource'] = True
    if callable(kwargs.get('caching_device')):
      # A device function (dynamic_rnn's `lambda op: op.device`) says where
      # graph variables cache their reads; an eager variable takes none.
      kwargs['caching_device'] = None
    # Under init_scope (a v1 optimizer's slots, tf_keras' weights) the graph is
    # entered again, in the scope TF1's init_scope kept (_outer_scope); in
    # graph code, not: entering resets the name scope.
    # In graph code the name scope is the one the code is in (`get_variable`
    # reset it to its variable scope itself; `tf.Variable` takes it).
    outer_scope = contextlib.nullcontext() if in_graph_code else (
        tf.compat.v1.name_scope(self._outer_scope()))
    with contextlib.nullcontext() if in_graph_code else self.as_default(), outer_scope:
      # The name TF1 gave the variable's op: its scope's, taken once here, so
      # the captured handle's op is named exactly so ('global_step', not
      # 'global_step_1': TF1 hooks build names and tags from it).
      with tf.compat.v1.name_scope(kwargs.get('name'), 'Variable') as scope:
        kwargs['name'] = scope
    local = tf.compat.v1.GraphKeys.LOCAL_VARIABLES in (kwargs.get('collections') or ())
    initial_value = kwargs.get('initial_value')
    if isinstance(initial_value, tf.Tensor) and getattr(initial_value, 'graph', None) is self:
      kwargs['initial_value'] = self._evaluate(initial_value, kwargs['name'])
    elif callable(initial_value) and self.seed is not None and tf_internals.CAN_SEED:
      kwargs['initial_value'] = functools.partial(
          _initial_value_as_tf1, self, _with_tf1_initializer(initial_value))
    variable = self._variable_holder.variable_creator_scope(next_creator, **kwargs)
    if isinstance(variable, tf.Variable) and not isinstance(variable, _GraphVariable):
      initial = None
      if local:  # v1 metrics' totals: local_variables_initializer() resets them
        with tf.init_scope():
          initial = tf.identity(variable.read_value())
      with contextlib.nullcontext() if in_graph_code else self.as_default():
        handle = self.capture(variable.handle, name=scope)
      variable.__class__ = _mixed_class(_GraphVariable, type(variable))
      variable._tfmon_graph_handle = handle  # pylint: disable=protected-access
      variable._tfmon_initial_value = initial  # pylint: disable=protected-access
      variable._tfmon_initializer = None  # pylint: disable=protected-access
    return variable

  def _outer_scope(self):
    """The name scope, absolute, a variable made eagerly under `init_scope` is
    named in, as TF1's init_scope kept the graph's: the graph's scope and the
    eager one entered since (tf_keras names a Sequential's inner layer's
    weights in 'dense/' eagerly, within the graph's 'sequential'), or None."""
    eager_scope = tf.get_current_name_scope()
    if not eager_scope:
      return None
    graph_scope = self.get_name_scope()
    if graph_scope and not (eager_scope + '/').startswith(graph_scope + '/'):
      eager_scope = f'{graph_scope}/{eager_scope}'
    return eager_scope + '/'

  def _builds_here(self):
    """Whether graph code of this graph is running: the default graph is this
    one, or the body of a loop or cond of it (dynamic_rnn's cell builds its
    variables in its while loop)."""
    graph = tf.compat.v1.get_default_graph()
    while graph is not self:
      if isinstance(graph, Graph) or not isinstance(graph, tf_internals.FuncGraph):
        return False
      graph = graph.outer_graph
    return True

  def _evaluate(self, tensor, name):
    """The value of a graph tensor computed from no placeholder: a variable's
    initial value, which TF1 computed when its initializer ran and an eager
    variable needs when it is made."""
    try:
      with tf.init_scope():
        return self.wrapped_function().prune([], [tensor])()[0]
    except Exception as e:  # pylint: disable=broad-except
      # prune's UnliftableError (not exported) names the placeholder.
      raise ValueError(
          f'The initial value of variable {name.rstrip("/")!r} ({tensor.name}) cannot '
          f'be computed when the variable is made: {str(e).splitlines()[0]}. Compute it from '
          'constants, initializers and other variables, not from placeholders or '
          'the input; or assign the value in a run after the session starts.') from None

  def finalize(self):
    """Finalizes the graph, as TF1's monitored sessions did, once ready for
    runs (`prepare_for_runs`)."""
    self.prepare_for_runs()
    super().finalize()

  def prepare_for_runs(self):
    """Gives each resource op a shared name, and orders reads before writes.

    A session runs subgraphs as separate pruned functions, and a resource op
    with an empty shared name (a lookup table) makes a new resource in each:
    the table one run initializes would not be the one another run reads. With
    a shared name every function finds the same one, as TF1's one graph had
    it. Iterators are shared otherwise (GraphCall feeds one handle to all).
    A plain `tf.compat.v1.Session` leaves the graph open, as TF1's did: its
    runs prepare the ops made since (a no-op when there are none).
    """
    operations = self.get_operations()
    if len(operations) == self._prepared:
      return
    self._prepared = len(operations)
    for op in operations:
      if op.type in _NOT_SHARED:
        continue
      try:
        shared = op.get_attr('shared_name')
        op.get_attr('container')
      except ValueError:
        continue
      if not shared:
        tf_internals.set_attr(op, 'shared_name', attr_value_pb2.AttrValue(
            s=f'tfmon_graph{self._number}_{op.name}'.encode()))
    with self.as_default():
      _order_reads_before_writes(operations)

  def global_variables(self):
    """The graph's global variables, each once, in the order made (TF1's Saver's)."""
    return _unique(self.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES))

  def checkpoint_initializers(self):
    """The ops `tf.compat.v1.train.init_from_checkpoint` made to initialize the
    graph's variables from a checkpoint: TF1's `global_variables_initializer()`
    ran them; an eager variable is initialized when made, so a session runs
    them when it starts from no checkpoint of its own."""
    return [op for op in map(tf_internals.initializer_op, self.global_variables())
            if isinstance(op, tf.Operation) and op.graph is self]

  def captured_placeholder_ids(self):
    """The ids of the ops standing for captured eager values (variables' handles)."""
    return {id(t.op) for t in self.internal_captures}

  def wrapped_function(self):
    """The whole graph as a WrappedFunction, to prune (made once, when finalized)."""
    if self._wrapped is None or not self.finalized:
      with tf.init_scope():
        self._wrapped = tf_internals.WrappedFunction(self, self._variable_holder)
    return self._wrapped


def _tf1_initializer(initializer):
  """TF1's initializer for a tf_keras one given no seed, or None.

  Under TF1 (and `disable_v2_behavior()`) Keras and the v1 layers resolved
  'glorot_uniform' and the rest to TF1's initializers, seeded by the graph's
  seed; in TF2 they resolve to Keras' own, seeded at random when given no seed,
  whatever `set_random_seed` says."""
  if not type(initializer).__module__.startswith('tf_keras.'):
    return None
  config = initializer.get_config()
  if config.get('seed', 0) is not None:  # seeded, or not random
    return None
  v1 = tf.compat.v1
  name = type(initializer).__name__
  scaled = {'HeNormal': (2., 'truncated_normal'), 'HeUniform': (2., 'uniform'),
            'LecunNormal': (1., 'truncated_normal'), 'LecunUniform': (1., 'uniform')}
  if name in scaled:
    scale, distribution = scaled[name]
    return v1.variance_scaling_initializer(scale, 'fan_in', distribution)
  make = {'GlorotUniform': v1.glorot_uniform_initializer,
          'GlorotNormal': v1.glorot_normal_initializer,
          'VarianceScaling': v1.variance_scaling_initializer,
          'RandomNormal': v1.random_normal_initializer,
          'RandomUniform': v1.random_uniform_initializer,
          'TruncatedNormal': v1.truncated_normal_initializer,
          'Orthogonal': v1.orthogonal_initializer}.get(name)
  return None if make is None else make(**config)


def _with_tf1_initializer(initial_value):
  """`initial_value` (a partial of an initializer, as `get_variable` and
  tf_keras make it) with TF1's initializer in place of tf_keras' (see
  _tf1_initializer), so a layer's weights start from TF1's values."""
  if not isinstance(initial_value, functools.partial):
    return initial_value
  tf1 = _tf1_initializer(initial_value.func)
  if tf1 is None:
    return initial_value
  return functools.partial(tf1, *initial_value.args, **initial_value.keywords)


def _initial_value_as_tf1(graph, initial_value):
  """`initial_value()` (a variable's initializer, run eagerly as the variable is
  made) with its random ops seeded as TF1's graph seeded them: with
  `graph.seed` (`tf.compat.v1.set_random_seed`) and, for an op given no seed of
  its own, the graph's count of such ops so far (`random_seed.get_seed`), which
  graph code's own random ops (dropout) count on too. The values are then
  TF1's, and the same in every run.

  Eager random kernels are cached by their seeds and continue their streams: a
  second graph of the same seed in one process would get other values. Seeds
  used before are computed in a function of their own instead, whose kernels
  start afresh (a few ms a variable). The eager seed is the process's: another
  thread's eager random ops, while a variable is made, would be seeded so too.
  """
  counts = tf_internals.graph_op_seed_counts()
  start = counts.get(graph, 0)
  op_seeds = _GraphOpSeeds(graph)
  with tf_internals.eager_seed(graph.seed, op_seeds):
    value = initial_value()
  if not op_seeds.repeated:
    return value

  def in_a_function():
    function_graph = tf.compat.v1.get_default_graph()
    function_graph.seed = graph.seed
    counts[function_graph] = start
    return initial_value()

  return tf.function(in_a_function, autograph=False)()


class _GraphOpSeeds:
  """Stands for the eager context's generator of op seeds (its `randint`):
  counts in the graph's count, as `random_seed.get_seed` does in graph mode,
  and notes a pair of seeds an eager random op of the process had before."""

  def __init__(self, graph):
    self._graph = graph
    self.repeated = False

  def randint(self, unused_low, unused_high):
    counts = tf_internals.graph_op_seed_counts()
    count = counts.setdefault(self._graph, 0)
    counts[self._graph] = count + 1
    seeds = (self._graph.seed, count)
    self.repeated = self.repeated or seeds in _eager_seeds_used
    _eager_seeds_used.add(seeds)
    return count


_eager_seeds_used = set()  # (graph seed, op seed) of initializers run eagerly


@contextlib.contextmanager
def _tf1_tensor_equality():
  """TF1's tensor equality (by identity, so hashable) while graph code runs.

  TF2 makes a tensor of a function graph unhashable, and TF1 code keys dicts by
  tensors: `feed_dict={x: batch}`, `SessionRunArgs(feed_dict={...})`.
  """
  was_on = tf_internals.tensor_equality_on()
  if was_on:  # TF logs each call: not per hook call of a run
    tf.compat.v1.disable_tensor_equality()
  try:
    yield
  finally:
    if was_on:
      tf.compat.v1.enable_tensor_equality()


def slice_of_whole(variable):
  """`(the whole's name, slices)` of a part of a partitioned variable (made by
  `get_variable(..., partitioner=...)`: 'emb/part_0' of 'emb'), else None.

  From the part's save slice info, a private attribute TF1's Saver reads too.
  """
  info = tf_internals.save_slice_info(variable)
  if info is None:
    return None
  return info.full_name, tuple(slice(offset, offset + size)
                               for offset, size in zip(info.var_offset, info.var_shape))


def require_eager_runtime():
  """Raises unless TensorFlow 2's eager runtime is on, which
  `tf.compat.v1.disable_v2_behavior()` (the TF1-to-TF2 migration guide's first
  line) and `disable_eager_execution()` turn off for the whole process.

  TF1 code that reads TF1's shapes (`x.shape[1].value`) still needs one of
  the things `disable_v2_behavior()` does: `disable_v2_tensorshape()`, which
  leaves the eager runtime on, and which the message names.
  """
  if not tf.compat.v1.executing_eagerly_outside_functions():
    raise RuntimeError(
        'tfmon runs on TensorFlow 2\'s eager runtime, which '
        'tf.compat.v1.disable_v2_behavior() or disable_eager_execution() turned '
        'off for this process. Remove that call: `with tfmon.Graph().as_default():` '
        'runs TF1 graph code as it is, and a tfmon session runs that graph. If the '
        'code reads TF1 shapes (`Dimension.value`, as in `x.shape[1].value`), call '
        'tf.compat.v1.disable_v2_tensorshape() in its place: it keeps the eager '
        'runtime on.')


# Ops that take a variable's handle and change nothing.
RESOURCE_READS = frozenset(['ReadVariableOp', 'VarIsInitializedOp', 'VariableShape',
                             'ResourceGather', 'ResourceGatherNd'])


def _order_reads_before_writes(operations):
  """Makes each read of a variable that does not depend on a write of it run
  before that write, as TF1's executor ran them in practice.

  TF1 left them unordered, but a read with nothing to wait for ran first: the
  global step TF's hooks fetch (`global_step/add`) was the step before the
  run's increment, which their step arithmetic counts on. In a function, the
  same graph reads it before or after, run by run. Only reads that wait for
  nothing are ordered so (see _waits_for_nothing); a read made after a write
  (under `control_dependencies`) keeps its order.
  """
  reads, writes = {}, {}
  for op in operations:
    if op.op_def is None or not op.op_def.is_stateful:
      continue
    try:  # a cond's or a call's: which of its handles it only reads
      read_only = set(op.get_attr('_read_only_resource_inputs'))
    except ValueError:
      read_only = None
    for index, handle in enumerate(op.inputs):
      if handle.dtype != tf.resource:
        continue
      if op.type in RESOURCE_READS or (read_only is not None and index in read_only):
        reads.setdefault(id(handle), []).append(op)
      else:
        writes.setdefault(id(handle), []).append(op)
  added = []
  for handle, handle_writes in writes.items():
    for read in reads.get(handle, ()):
      if _waits_for_nothing(read):
        before = read if read.type in RESOURCE_READS else _outputs_done(read)
        for write in handle_writes:
          if before in write.control_inputs:  # prepared before
            continue
          tf_internals.add_control_input(write, before)
          added.append((write, before))
  return added


def _waits_for_nothing(op):
  """Whether `op` needs only variables' handles and constants: so ordering a
  write after it cannot form a cycle, nor make the write's run compute more."""
  seen, pending = set(), [op]
  while pending:
    for parent in parents(pending.pop()):
      if id(parent) not in seen:
        seen.add(id(parent))
        if parent.type not in ('Placeholder', 'Const', 'VarIsInitializedOp') or (
            parent.type == 'Placeholder' and parent.outputs[0].dtype != tf.resource):
          return False
        pending.append(parent)
  return True


def _outputs_done(op):
  """An op that runs once `op`'s outputs are computed. A cond (an If that reads
  a variable) is lowered to ops whose control outputs do not wait for them."""
  with tf.name_scope(op.name + '/outputs_done'):
    return tf.group(*[tf.identity(t) for t in op.outputs])


def parents(op):
  """The ops `op` takes an input from or waits for."""
  return itertools.chain((t.op for t in op.inputs), op.control_inputs)


_VARIABLE_UPDATES = ('AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp')
_KERAS_UPDATES = _VARIABLE_UPDATES + ('If', 'Case')


# Resource ops given no shared name: iterators, which GraphCall makes once and
# feeds to every function (OneShotIterator's kernel refuses one anyway).
_NOT_SHARED = ('OneShotIterator', 'IteratorV2', 'Iterator', 'MultiDeviceIterator')


class _GraphWrites(tf_internals.ResultsOfWrites):
  """Mixed into a captured graph's variables and what their writes return."""

  def _tfmon_result_of_write(self, result, op):
    """What a write made in graph code returns (`tf.compat.v1.assign_add(v,
    1)`), as TF1's: TF makes it eager, as the variable is (see
    tf_internals.ResultsOfWrites); hooks assert on its `.graph` and name
    things by its `.name`, TF1's its op's ('AssignAddVariableOp')."""
    if (isinstance(op, tf.Operation) and isinstance(op.graph, Graph) and
        isinstance(result, tf.Variable) and not isinstance(result, _ResultOfWrite)):
      result.__class__ = _mixed_class(_ResultOfWrite, type(result))
    return result


class _ResultOfWrite(_GraphWrites):
  """The value a write of a captured graph's variable leaves, as TF1's: of the
  graph its op is in, and named by that op. A session fetching it runs the
  write and reads the value after it (GraphCall), as TF1 did."""

  @property
  def graph(self):
    return self.op.graph

  @property
  def name(self):
    return self.op.name


class _GraphVariable(_GraphWrites):
  """Mixed into a captured graph's eager variables: `.op` and `.graph` as TF1's.

  Also when executing eagerly: v1 optimizers key their slots by `var.op` when
  it exists, and look them up both in graph code and under `init_scope`.
  """

  @property
  def op(self):
    return self._tfmon_graph_handle.op

  @property
  def graph(self):
    graph = self._tfmon_graph_handle.graph
    if tf.compat.v1.get_default_graph() is graph:
      return graph
    return super().graph  # eager code (a checkpoint's traced write) builds elsewhere

  @property
  def initial_value(self):
    value = super().initial_value
    if tf.executing_eagerly():
      return value
    # A tensor of the graph (TF1's global-step read uses it in a cond). An eager
    # variable keeps no initial value; it is always initialized, so the value
    # is never read.
    return tf.zeros(self.shape, self.dtype) if value is None else tf.identity(value)

  def initialized_value(self):
    """Its value once initialized, as TF1's: an eager variable always is."""
    return self.read_value()

  @property
  def initializer(self):
    """An op that re-initializes a local variable (a v1 metric's total), as TF1's
    `local_variables_initializer()` did; a global variable is initialized when
    made (eagerly), and its initializer does nothing."""
    if self._tfmon_initializer is None:
      with self._tfmon_graph_handle.graph.as_default():
        initial = self._tfmon_initial_value
        self._tfmon_initializer = (
            tf.no_op() if initial is None else
            self.assign(initial, read_value=False))
    return self._tfmon_initializer

  def to_proto(self, export_scope=None):
    """A VariableDef naming the captured handle: what TF1's Saver writes into
    the `.meta` file's collections (an eager variable has no op names)."""
    name = self._tfmon_graph_handle.name
    if export_scope and name.startswith(export_scope + '/'):
      name = name[len(export_scope) + 1:]
    return variable_pb2.VariableDef(variable_name=name, is_resource=True,
                                    trainable=self.trainable)


_mixed_classes = {}  # (mixin, a TF variable class) -> the class of both


def _mixed_class(mixin, cls):
  if (mixin, cls) not in _mixed_classes:
    _mixed_classes[mixin, cls] = type(cls.__name__, (mixin, cls), {})
  return _mixed_classes[mixin, cls]


def _unique(items):
  return list({id(item): item for item in items}.values())


def current():
  """The tfmon.Graph that is the default graph here, or the one a running
  session works on (see `running`), or None."""
  graph = tf.compat.v1.get_default_graph()
  if isinstance(graph, Graph):
    return graph
  return getattr(_running, 'graph', None)


_running = threading.local()


@contextlib.contextmanager
def running(graph):
  """Runs eagerly (out of `graph`'s graph mode) while keeping `graph` as the one
  `current()` names: what a session does between its hooks' graph code.

  Only eager mode is switched on (1.4 µs a run, where `init_scope` took ~15):
  the captured graph stays the default graph, as under `init_scope`.
  """
  previous = getattr(_running, 'graph', None)
  if graph is None or (previous is graph and tf.executing_eagerly()):
    yield  # nothing to do, or already running it (a session calls itself)
    return
  _running.graph = graph
  try:
    with tf_internals.eager_mode():
      yield
  finally:
    _running.graph = previous


def _average_tensors_as_tf1_did():
  """Lets `ExponentialMovingAverage.apply` average tensors in a captured graph.

  TF1 code averages tensors (TF's CIFAR-10 tutorial its losses), which TF 2
  refuses whenever eager execution is on outside functions, as it is around a
  captured graph ("does not support non-Variable tensors when eager execution
  is enabled"); its code for tensors is TF1's and works here. So while `apply`
  runs in a captured graph's code, it sees TF1's graph mode
  (tf_internals.moving_averages_as_in_tf1_graph; without it, TF's own error
  stands).
  """
  if not tf_internals.CAN_AVERAGE_TENSORS:
    return
  cls = tf.compat.v1.train.ExponentialMovingAverage
  original = cls.apply

  def apply(self, var_list=None):
    if not (isinstance(tf.compat.v1.get_default_graph(), Graph) and
            not tf.executing_eagerly() and
            any(isinstance(v, tf.Tensor) for v in var_list or ())):
      return original(self, var_list)
    with tf_internals.moving_averages_as_in_tf1_graph():
      return original(self, var_list)

  apply.__doc__ = original.__doc__
  cls.apply = apply


_layers_routed = []


def _route_v1_layers_to_tf_keras():
  """Points `tf.compat.v1.layers` and `tf.compat.v1.nn.rnn_cell` at tf_keras'
  v1 modules when tf_keras is installed.

  With Keras 3, TensorFlow routes them to Keras 3, which has neither ("`dense`
  is not available with Keras 3") unless TF_USE_LEGACY_KERAS was set before
  the module was first used, which would also route `tf.keras`. So only these
  are pointed at tf_keras, where TensorFlow keeps them, through stand-ins that
  import tf_keras on first use: the import takes 0.2 s, which a graph without
  v1 layers need not pay. A script's alias of TensorFlow's loader, taken before
  (`layers = tf.compat.v1.layers` at its top), loads tf_keras' module when first
  used (tf_internals.route_keras_loaders_to_tf_keras); the stand-ins also say
  how to install tf_keras when it is missing.
  """
  if not _layers_routed:
    _layers_routed.append(os.environ.get('TF_USE_LEGACY_KERAS') is None)
  if not _layers_routed[0]:
    return
  tf_internals.route_keras_loaders_to_tf_keras()
  # Checked at every entry: importing tf_keras sets TensorFlow's loader again.
  for name in tf_internals.V1_KERAS_MODULES:
    holders, attribute = tf_internals.v1_keras_module_holders(name)
    if tf_internals.is_lazy_keras_module(getattr(holders[0], attribute, None)):
      _set_v1_module(name, _V1LayersOnFirstUse(name))


def _set_v1_module(name, module):
  holders, attribute = tf_internals.v1_keras_module_holders(name)
  for holder in holders:
    setattr(holder, attribute, module)


class _V1LayersOnFirstUse(types.ModuleType):
  """A v1 Keras module (`tf.compat.v1.layers`, named so) until first used:
  then tf_keras' module for it."""

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)
    if importlib.util.find_spec('tf_keras') is None:
      raise ImportError(
          f'{self.__name__}.{name} needs the tf_keras package (Keras 3 has no '
          'v1 layers). Install it without replacing your TensorFlow: '
          '`pip install --no-deps tf_keras` (a plain `pip install tf_keras` pulls '
          'the full tensorflow wheel over tensorflow-cpu).')
    module = tf_internals.tf_keras_v1_module(self.__name__)
    _set_v1_module(self.__name__, module)
    return getattr(module, name)
