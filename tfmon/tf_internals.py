"""Every private TensorFlow internal tfmon uses, and nothing else.

The rest of the package touches no `tensorflow.python` module, no
`tf.__internal__` name and no private attribute of a TensorFlow object: it asks
here. Each entry says why the public API does not do (a measured gain, or a
TF1 behaviour nothing public gives), and what happens without it: its public
fallback, or TensorFlow's own error. `tests/test_tf_internals.py` holds a canary
for each, which fails loudly when a TensorFlow upgrade removes or renames it.

Groups, by who asks:
  - compiled calls (compiled/): running a traced function as one op;
  - step functions (compiled/step_graph): a tf.function's bound Python
    function; a function graph's watched variables and collections;
  - graph capture (compiled/graph_capture): `FuncGraph`, wrap_function's
    variable holder and `prune`, graph/eager mode switches, op attributes and
    control inputs, the eager context's seeds, tensor equality, moving
    averages' eager check, tf_keras' v1 modules; under a strategy, a
    function graph's call-time captures and v1 optimizers' loss scaling;
  - TF's own objects read as TF1 code made them (hooks/tf_builtins,
    checkpointing, estimator/): their private state;
  - summaries, export, warm start and the workers' barrier at exit.
"""

import collections
import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
import sys
import threading
import types

import tensorflow as tf
from tensorflow.python.client import pywrap_tf_session as _pywrap_tf_session
from tensorflow.python.client import session as _tf_session
from tensorflow.python.data.util import traverse as _dataset_traverse
from tensorflow.python.eager import cancellation as _cancellation
from tensorflow.python.eager import context as _context
from tensorflow.python.eager import execute as _execute
from tensorflow.python.eager import lift_to_graph as _lift_to_graph
from tensorflow.python.eager import record as _record
from tensorflow.python.eager import wrap_function as _wrap_function
from tensorflow.python.eager.polymorphic_function import atomic_function as _atomic_function
from tensorflow.python.framework import func_graph as _func_graph
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import random_seed as _random_seed
from tensorflow.python.framework import stack as _stack
from tensorflow.python.ops import data_flow_ops as _data_flow_ops
from tensorflow.python.ops import summary_ops_v2 as _summary_ops_v2
from tensorflow.python.trackable import resource as _resource
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks
from tensorflow.python.training import checkpoint_ops as _checkpoint_ops
from tensorflow.python.training import moving_averages as _moving_averages
from tensorflow.python.util import lazy_loader as _lazy_loader
from tensorflow.python.util import object_identity as _object_identity


# ---------------------------------------------------------------- compiled calls

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
  the output structure to the caller. Otherwise, or on a TensorFlow version
  without these internals, it goes through `_call_flat`.
  """
  captures = getattr(concrete, '_captured_inputs', None)
  function = getattr(concrete, '_inference_function', None)
  name = getattr(function, 'name', None)
  if captures is None or name is None or not hasattr(_record, 'could_possibly_record'):
    return _structured_caller(concrete)
  num_outputs = len(concrete.outputs)
  op_name = name.decode() if isinstance(name, bytes) else name
  # Captured inputs are variable handles and constants, fixed once traced; a
  # capture made by reference (a callable) is read anew at every call.
  fixed_captures = None if any(map(callable, captures)) else concrete.captured_inputs
  ctx = _context.context()
  # The context's FunctionCallOptions (replaced when the config changes) and
  # its attrs; holding the object itself, so a new one is never taken for it.
  cached = [None, None]
  fallback = _structured_caller(concrete)

  def call(tensors):
    if _record.could_possibly_record() or _cancellation.context() is not None:
      return fallback(tensors)
    options = ctx.function_call_options
    if cached[0] is not options:
      cached[:] = options, tuple(itertools.chain(*options.as_attrs().items()))
    attrs = cached[1]
    inputs = tensors + (fixed_captures if fixed_captures is not None
                        else concrete.captured_inputs)
    try:
      return _execute.quick_execute(op_name, num_outputs, inputs, attrs, ctx)
    except tf.errors.OpError:
      # Adds where in the user's step the failing op was defined, as TF does.
      with _atomic_function.InterpolateRuntimeError(function):
        raise

  return call


def _structured_caller(concrete):
  """`call(tensors)` through `_call_flat` (flat inputs, captures apart); without
  it, the public call on the same inputs."""
  call_flat = getattr(concrete, '_call_flat', None)

  def call(tensors):
    if call_flat is not None:
      outputs = call_flat(tensors, concrete.captured_inputs)
    else:
      outputs = concrete(*tensors)
    return [t for t in tf.nest.flatten(outputs) if t is not None]
  return call


# ---------------------------------------------------------------- step functions

def python_function(fn):
  """The Python function behind a `tf.function`: `_python_function`, the bound
  wrapper of a tf.function method, where the public `python_function` is the
  unbound one (the fallback)."""
  inner = getattr(fn, '_python_function', None) or getattr(fn, 'python_function', None)
  return inner if callable(inner) else None


def watched_variables(graph):
  """The variables a function graph has read so far (`_watched_variables`);
  without it, none."""
  return getattr(graph, '_watched_variables', ())


def collections_of(graph):
  """A function graph's own dict of collections (`_collections`), to stand a
  collection in for the outer graph's; None where it or the watched variables
  are missing (then v1 `minimize()` needs `var_list`, as it says)."""
  collections = getattr(graph, '_collections', None)
  if not isinstance(collections, dict) or not hasattr(graph, '_watched_variables'):
    return None
  return collections


# ---------------------------------------------------------------- graph capture

# The graph capture `tf.compat.v1.wrap_function` is built on: `tfmon.Graph` is a
# FuncGraph (an op that uses an eager tensor captures it) that overrides
# `_create_op_internal` to collect Keras layers' updates; its variables go
# through wrap_function's variable holder, and runs are pruned functions.
FuncGraph = _func_graph.FuncGraph
VariableHolder = _wrap_function.VariableHolder
WrappedFunction = _wrap_function.WrappedFunction



def prune(wrapped, feeds, fetches, needed_ops):
  """`wrapped.prune(feeds, fetches)` for flat lists, copying only `needed_ops`
  (ids of the ops the fetches need, the feeds' excluded) into the function.

  TF's `lift_to_graph` also copies every op above a feed that has inputs (it
  tests an op against a set of tensors: never in it), unconnected. A pruned
  function fed internal tensors (the summaries' `gate`) held a copy of nearly
  the whole graph: 1,216 ops of the census example's 1,887 where ~100 run, a
  0.2 s prune. The other ops go in as already lifted, so none is copied. With
  `lift_to_graph` not taking `op_map` (a later TF), TF's prune.
  """
  if not CAN_PRUNE_NEEDED:
    return wrapped.prune(feeds, fetches)
  graph = wrapped.graph
  captures = {id(c) for c in graph.internal_captures}
  feeds = [f for f in feeds if id(f) not in captures]
  lifted = _object_identity.ObjectIdentityDictionary()
  for op in graph.get_operations():
    if id(op) not in needed_ops:
      lifted[op] = op  # never referenced by a copied op
  tensors = [f for f in fetches if isinstance(f, tf.Tensor)]
  operations = [f for f in fetches if isinstance(f, tf.Operation)]
  with graph.as_default():
    pruned_graph = FuncGraph('pruned')
  lift_map = _lift_to_graph.lift_to_graph(
      operations + tensors, pruned_graph, sources=feeds + graph.internal_captures,
      base_graph=graph, op_map=lifted)
  pruned_graph.outputs.extend(lift_map[t] for t in tensors)
  pruned_graph.control_outputs.extend(lift_map[op] for op in operations)
  pruned_graph.inputs.extend(lift_map[f] for f in feeds)
  for external, internal in graph.captures:
    pruned_graph.add_capture(external, lift_map[internal])
  for function in graph._functions.values():  # pylint: disable=protected-access
    pruned_graph._add_function(function)  # pylint: disable=protected-access
  pruned_graph.variables = graph.variables
  pruned_graph.structured_outputs = [
      None if isinstance(f, tf.Operation) else lift_map[f] for f in fetches]
  pruned_graph.structured_input_signature = None
  pruned = WrappedFunction(pruned_graph,
                           variable_holder=wrapped._variable_holder)  # pylint: disable=protected-access
  pruned._num_positional_args = len(feeds)  # pylint: disable=protected-access
  pruned._arg_keywords = [f.op.name for f in feeds]  # pylint: disable=protected-access
  return pruned


def graph_function_caller(graph, inputs, outputs, operations, needed_ops):
  """`(call, release)` for one function of `needed_ops` (ids) of the captured
  `graph` taking `inputs` and giving `outputs` (running `operations` too),
  made by TensorFlow's C API from the graph itself (`TF_GraphToFunction`, as
  TF makes a `tf.function`'s), or None without it.

  `WrappedFunction.prune` copies each op into a new graph in Python (~0.17 ms
  an op: 0.25 s for the census example's evaluation); this copies none.
  `call(tensors)` runs it on the inputs' values, the graph's captured values
  (variable handles) added; `release()` unregisters it.
  """
  if not CAN_MAKE_C_FUNCTIONS:
    return None
  captures = [(external, internal) for external, internal in graph.captures
              if id(internal.op) in needed_ops]
  arguments = list(inputs) + [internal for _, internal in captures]
  argument_ops = {id(t.op) for t in arguments}
  body = [op for op in graph.get_operations()
          if id(op) in needed_ops and id(op) not in argument_ops]
  name = f'tfmon_graph_run_{next(_graph_function_numbers)}'
  with graph._c_graph.get() as c_graph:  # pylint: disable=protected-access
    function = _pywrap_tf_session.TF_GraphToFunction_wrapper(
        c_graph, name, False, [op._c_op for op in body],  # pylint: disable=protected-access
        [t._as_tf_output() for t in arguments],  # pylint: disable=protected-access
        [t._as_tf_output() for t in outputs], [],  # pylint: disable=protected-access
        [op._c_op for op in operations], [], None, '')  # pylint: disable=protected-access
  ctx = _context.context()
  ctx.add_c_function(function)
  _pywrap_tf_session.TF_DeleteFunction(function)
  externals = [external for external, _ in captures]
  num_outputs = len(outputs)
  cached = [None, None]

  def call(tensors):
    options = ctx.function_call_options
    if cached[0] is not options:
      cached[:] = options, tuple(itertools.chain(*options.as_attrs().items()))
    return _execute.quick_execute(name, num_outputs, list(tensors) + externals,
                                  cached[1], ctx)

  def release():
    if ctx.has_function(name):
      ctx.remove_function(name)

  return call, release


_graph_function_numbers = itertools.count()


# ---------------------------------------------------------------- Keras 3

def keras3_path():
  """Keras 3's current name path ('sequential/dense' while that layer builds),
  which its variables' `path` takes; None without Keras 3's name scopes."""
  name_scope = sys.modules.get('keras.src.backend.common.name_scope')
  current_path = getattr(name_scope, 'current_path', None)
  return current_path() if current_path is not None else None


@contextlib.contextmanager
def keras3_names_per_graph():
  """Keras 3's automatic layer names ('dense', 'dense_1') counted afresh while
  this lasts, as TF 2.15's Keras counted them per graph (Keras 3 counts per
  process: a second graph's layers were 'dense_2'...). Without Keras 3's
  global state (or Keras 3 not imported), nothing changes."""
  state = sys.modules.get('keras.src.backend.common.global_state')
  if state is None or not hasattr(state, 'set_global_attribute'):
    yield
    return
  saved = state.get_global_attribute('object_name_uids')
  state.set_global_attribute('object_name_uids', collections.defaultdict(int))
  try:
    yield
  finally:
    state.set_global_attribute('object_name_uids', saved)
CAN_MAKE_C_FUNCTIONS = (hasattr(_pywrap_tf_session, 'TF_GraphToFunction_wrapper') and
                        hasattr(_context.Context, 'add_c_function') and
                        hasattr(FuncGraph, '_c_graph'))

CAN_PRUNE_NEEDED = ('op_map' in inspect.signature(_lift_to_graph.lift_to_graph).parameters
                    and hasattr(FuncGraph, '_add_function'))

# TF1's Saver.save and restore accept only instances of this base class; a
# tfmon session derives from it, so TF1 code can save through it.
SessionInterface = _tf_session.SessionInterface


def default_session(session):
  """A context in which `session` is `tf.compat.v1.get_default_session()`, as
  TF1's `Session.as_default()` made it (`tensor.eval()`, `op.run()`)."""
  return _stack.default_session(session)


class _GraphMode:
  """Graph mode for this thread, as `context.graph_mode()` sets it (its
  thread-local `is_eager` flag), without its generator-based context manager:
  TF1 hooks' `before_run`/`after_run` run in it, two switches per hook a run."""

  __slots__ = ('_data', '_was_eager')

  def __enter__(self):
    self._data = _context.context()._thread_local_data  # pylint: disable=protected-access
    self._was_eager = self._data.is_eager
    self._data.is_eager = False

  def __exit__(self, *exc_info):
    self._data.is_eager = self._was_eager


# Whether the eager context keeps its mode in a thread-local `is_eager` flag;
# without it (a later TF), TF's own context manager.
CAN_SWITCH_MODE_FAST = hasattr(
    getattr(_context.context(), '_thread_local_data', None), 'is_eager')


def graph_mode():
  """Graph mode, without entering a graph: ~0.5 µs where TF's `graph_mode()`
  takes 1.4 and `as_default()` 12."""
  return _GraphMode() if CAN_SWITCH_MODE_FAST else _context.graph_mode()


def eager_mode():
  """Eager mode, keeping the default graph: 1.4 µs where `init_scope` takes ~15."""
  return _context.eager_mode()


def set_attr(op, name, attr_value):
  """Sets attribute `name` of a built op (`attr_value` an AttrValue proto)."""
  op._set_attr(name, attr_value)  # pylint: disable=protected-access


def add_control_input(op, before):
  """Makes a built op `op` run after `before`."""
  op._add_control_input(before)  # pylint: disable=protected-access


def initializer_op(variable):
  """What `tf.compat.v1.train.init_from_checkpoint` left as a variable's
  initializer (`_initializer_op`), or None."""
  return getattr(variable, '_initializer_op', None)


def deferred_captures(graph):
  """`[(placeholders, closure)]`: the values a function graph takes at call
  time (`capture_call_time_value`), `closure()` giving a list of a value for
  each placeholder: a strategy's collective ops get their instance keys so, a
  new one each call. `WrappedFunction.prune` keeps only by-value captures, so
  GraphCall feeds these itself."""
  return [(tf.nest.flatten(placeholders), closure) for placeholders, closure in
          zip(graph.deferred_internal_captures, graph.deferred_external_captures)]


@contextlib.contextmanager
def variable_creator_scope(creator, priority):
  """`tf.variable_creator_scope` on the default graph with a `priority`
  (called before creators of a lower one; TF's public scope and a strategy's
  have 100): a captured graph's creator must run after a strategy's, whichever
  scope was entered first, to make each replica's variable."""
  with tf.compat.v1.get_default_graph()._variable_creator_scope(  # pylint: disable=protected-access
      creator, priority=priority):
    yield


def scale_loss_as_estimator(strategy):
  """The scope in which v1 optimizers divide a mean loss by the number of
  replicas (Optimizer._scale_loss), as TF 1.x always did and TF <= 2.15's
  Estimator asked for by this private flag; without it, the replicas' summed
  gradients are `num_replicas` times the one device's."""
  return strategy._scale_loss_for_estimator_enabled()  # pylint: disable=protected-access


def loss_scaled_by_optimizer(graph):
  """Whether the last v1 optimizer built in `graph` divided its loss by the
  number of replicas (Optimizer._scale_loss marks the graph): TF's Estimator
  then reported the replicas' mean loss, else their sum."""
  return getattr(graph, '_is_loss_scaled_by_optimizer', False)


def save_slice_info(variable):
  """A part of a partitioned variable's `_save_slice_info` (`full_name`,
  `var_offset`, `var_shape`), which TF1's Saver reads too; None for a whole one."""
  return getattr(variable, '_save_slice_info', None)


class ResultsOfWrites:
  """Mixed into a resource variable class, before it: what a write returns
  passes through `self._tfmon_result_of_write(result, op)` (`op` the write's op).

  TF's writes that return the value written (`assign`, `assign_add`,
  `assign_sub`, the scatters, and `tf.compat.v1.assign_add` and
  `scatter_update`, which call them or it directly) return what the private
  `_lazy_read(op)` makes: an `_UnreadVariable`, standing for the value after
  the write. A captured graph's variable is eager, so TF makes it an eager
  one (no `.graph`, named 'UnreadVariable') where TF1 made a graph one; the
  graph capture gives it TF1's. Without `_lazy_read` (a later TF) nothing
  passes through, and TF's eager results stand.
  """

  def _tfmon_result_of_write(self, result, unused_op):
    return result

  def _lazy_read(self, op):
    return self._tfmon_result_of_write(super()._lazy_read(op), op)  # pylint: disable=protected-access


def write_of(result):
  """The write op behind what a write returned (`_UnreadVariable`'s
  `_parent_op`), or None for anything else."""
  op = getattr(result, '_parent_op', None)
  return op if isinstance(op, tf.Operation) else None


def tensor_equality_on():
  """Whether TF2's tensor equality (tensors unhashable) is on."""
  return getattr(tf.Tensor, '_USE_EQUALITY', True)


# The eager context's seed and op-seed generator and `random_seed`'s per-graph
# op counts: initializers run eagerly as graph code makes variables, and with
# these they draw TF1's values under `tf.compat.v1.set_random_seed`. Without
# them (a later TF) initializers are seeded by the eager context, unseeded
# unless `tf.random.set_seed` was called.
CAN_SEED = (hasattr(_context.context(), '_seed') and
            hasattr(_context.Context, '_internal_operation_seed') and
            hasattr(_random_seed, '_graph_to_seed_dict'))


def graph_op_seed_counts():
  """`{graph: random ops seeded so far}`, what `random_seed.get_seed` counts."""
  return _random_seed._graph_to_seed_dict  # pylint: disable=protected-access


_eager_seed_lock = threading.RLock()  # graphs built in two threads at once


@contextlib.contextmanager
def eager_seed(seed, op_seeds):
  """The eager context's global seed and its generator of op seeds (`_rng`,
  made by `tf.random.set_seed`; anything with `randint(low, high)`) replaced for
  a while. The eager seed is the process's, so it is swapped under a lock."""
  ctx = _context.context()
  with _eager_seed_lock:
    saved = ctx._seed, getattr(ctx, '_rng', None)  # pylint: disable=protected-access
    ctx._seed, ctx._rng = seed, op_seeds  # pylint: disable=protected-access
    try:
      yield
    finally:
      ctx._seed, ctx._rng = saved  # pylint: disable=protected-access


# `ExponentialMovingAverage.apply` refuses tensors whenever eager execution is
# on outside functions, through one check of its module's `ops`; its code for
# tensors is TF1's and works in a captured graph.
CAN_AVERAGE_TENSORS = hasattr(getattr(_moving_averages, 'ops', None),
                              'executing_eagerly_outside_functions')


class _OpsInTf1Graph(types.ModuleType):
  """`moving_averages.ops`, but for its one check, answered as TF1 graph mode."""

  def __getattr__(self, name):
    return getattr(_moving_averages_ops, name)

  @staticmethod
  def executing_eagerly_outside_functions():
    return False


_moving_averages_ops = getattr(_moving_averages, 'ops', None)
_ops_in_tf1_graph = _OpsInTf1Graph('ops')


@contextlib.contextmanager
def moving_averages_as_in_tf1_graph():
  """`ExponentialMovingAverage` sees TF1's graph mode for a while (a no-op
  without CAN_AVERAGE_TENSORS: TF's own error stands)."""
  if not CAN_AVERAGE_TENSORS:
    yield
    return
  _moving_averages.ops = _ops_in_tf1_graph
  try:
    yield
  finally:
    _moving_averages.ops = _moving_averages_ops


# TF2's queues make their resource under `init_scope`: in a captured graph an
# eager tensor, whose `.op` TF1's `QueueBase.name` (and so QueueRunner) reads.
_queue_name = _data_flow_ops.QueueBase.name


def _name_of_queue(queue):
  if isinstance(queue.queue_ref, _ops.EagerTensor):
    return queue._name  # pylint: disable=protected-access
  return _queue_name.fget(queue)


def let_queues_of_captured_graphs_be_named():
  """`QueueBase.name` of a queue whose resource is eager: the name TF gave it
  then (`_name`), where TF1 read its op's."""
  _data_flow_ops.QueueBase.name = property(_name_of_queue, doc=_queue_name.__doc__)


# The dummy resources TF2's dataset ops take when built in a function graph (a
# tfmon.Graph is one), where TF1's graph built ops without them: `shuffle` and
# `Dataset.random` a seed generator, `cache` a memory cache. Each only tells
# the dataset op to make its own, as TF1's did.
_DUMMY_DATASET_RESOURCES = ('DummySeedGenerator', 'DummyMemoryCache')


def let_one_shot_iterators_capture_dummy_dataset_resources():
  """Lets `make_one_shot_iterator` copy those dummy ops into its dataset
  factory, as it copies dataset ops (`traverse.OP_TYPES_ALLOWLIST`, where TF
  lists its own such dummy, DummyIterationCounter). Without it, a shuffled
  dataset's one-shot iterator fails in a captured graph ("Cannot capture a
  stateful node (name:DummySeedGenerator...) by value"); without the list (a
  later TF), that error stands."""
  allowlist = getattr(_dataset_traverse, 'OP_TYPES_ALLOWLIST', None)
  if isinstance(allowlist, list):
    allowlist.extend(op for op in _DUMMY_DATASET_RESOURCES if op not in allowlist)


# TensorFlow's lazily loaded Keras modules that TF1 code uses, and tf_keras'
# v1 module for each (tf_keras keeps them under a private path).
V1_KERAS_MODULES = {
    'tf.compat.v1.layers': 'tf_keras.api._v1.keras.__internal__.legacy.layers',
    'tf.compat.v1.nn.rnn_cell': 'tf_keras.api._v1.keras.__internal__.legacy.rnn_cell',
}


def v1_keras_module_holders(name):
  """`([holders], attribute)` of `name` ('tf.compat.v1.layers'): the wrapper
  `tf.compat.v1...` is and TF's API module inside it both hold the module."""
  path, attribute = name.split('.', 1)[1].rsplit('.', 1)
  wrapper = tf
  for part in path.split('.'):
    wrapper = getattr(wrapper, part)
  holders = [wrapper, sys.modules.get('tensorflow._api.v2.' + path)]
  return [h for h in holders if h is not None], attribute


def is_lazy_keras_module(module):
  """Whether `module` is TensorFlow's lazy loader of a Keras module, not loaded."""
  return type(module).__name__ == 'KerasLazyLoader'


def tf_keras_v1_module(name):
  """tf_keras' v1 module for `name`, a key of V1_KERAS_MODULES."""
  return importlib.import_module(V1_KERAS_MODULES[name])


# A loader picks its package when first used (`KerasLazyLoader._initialize`);
# wrapped, it takes tf_keras' for a v1 module whatever holds it. Without these
# internals (a later TF), TensorFlow's routing and error stand for aliases.
CAN_ROUTE_KERAS_LOADERS = hasattr(getattr(_lazy_loader, 'KerasLazyLoader', None),
                                  '_initialize')

# A loader's `submodule` (of Keras' v1 API) -> tf_keras' module for it.
_TF_KERAS_BY_SUBMODULE = {module.rsplit('keras.', 1)[1]: module
                          for module in V1_KERAS_MODULES.values()}


def route_keras_loaders_to_tf_keras():
  """Makes every lazy loader of a V1_KERAS_MODULES module that TensorFlow routes
  to Keras 3 (which has none of them) load tf_keras' module instead, on first
  use, as TensorFlow itself does under TF_USE_LEGACY_KERAS. Also a loader a
  script holds in an alias taken before (`layers = tf.compat.v1.layers`, `from
  tensorflow.compat.v1 import layers`), and those TensorFlow makes anew when
  `tensorflow.compat.v1` is imported (importing tf_keras does). Once per
  process; without tf_keras installed, nothing changes."""
  if not CAN_ROUTE_KERAS_LOADERS:
    return
  loader_class = _lazy_loader.KerasLazyLoader
  initialize = loader_class._initialize  # pylint: disable=protected-access
  if getattr(initialize, 'routes_to_tf_keras', False):
    return

  def _initialize(loader):
    initialize(loader)
    state = vars(loader)  # getattr would load the module
    module = _TF_KERAS_BY_SUBMODULE.get(state.get('_tfll_submodule'))
    if (module is not None and state.get('_tfll_mode') == 'v1' and
        state.get('_tfll_keras_version') == 'keras_3' and
        importlib.util.find_spec('tf_keras') is not None):
      loader._tfll_keras_version = 'tf_keras'  # pylint: disable=protected-access
      _lazy_loader.LazyLoader.__init__(
          loader, state['_tfll_name'], state['_tfll_parent_module_globals'], module)

  _initialize.routes_to_tf_keras = True
  loader_class._initialize = _initialize  # pylint: disable=protected-access


def in_tf_keras_layer_call():
  """Whether a tf_keras layer (the v1 layers' base) is inside its `call`."""
  utils = sys.modules.get('tf_keras.src.engine.base_layer_utils')
  return utils is not None and utils.call_context().in_call


# ---------------------------------------------------------------- TF's own objects

# What tfmon reads of TF's own objects, made by TF1 code and handed to tfmon: a
# TF hook's constructor arguments (TF keeps no public copy), a TF Scaffold's
# pieces as given. tf_state() reads only names listed here; the canary builds
# each class and checks every name.
TF_STATE = {
    _tf_hooks.StopAtStepHook: ('_num_steps', '_last_step'),
    _tf_hooks.LoggingTensorHook: ('_tensors', '_tag_order', '_timer', '_log_at_end',
                                  '_formatter'),
    _tf_hooks.StepCounterHook: ('_timer', '_output_dir', '_summary_writer'),
    _tf_hooks.CheckpointSaverHook: ('_saver', '_timer', '_checkpoint_dir', '_save_path',
                                    '_scaffold', '_listeners', '_save_graph_def'),
    _tf_hooks.SummarySaverHook: ('_summary_op', '_timer', '_output_dir',
                                 '_summary_writer', '_scaffold'),
    _tf_hooks.NanTensorHook: ('_loss_tensor', '_fail_on_nan_loss'),
    _tf_hooks.FinalOpsHook: ('_final_ops', '_final_ops_feed_dict', '_final_ops_values'),
    _tf_hooks.GlobalStepWaiterHook: ('_wait_until_step',),
    _tf_hooks.ProfilerHook: ('_timer', '_output_file', '_show_dataflow', '_show_memory'),
    tf.compat.v1.train.Scaffold: ('_init_fn', '_saver', '_summary_op'),
    tf.compat.v1.train.Saver: ('_var_list',),
    tf.train.CheckpointManager: ('_checkpoint_prefix',),
    _tf_hooks.SecondOrStepTimer: ('_every_secs', '_every_steps'),
}


_TF_STATE_NAMES = frozenset(itertools.chain(*TF_STATE.values()))


def tf_state(obj, name, default=None):
  """Private attribute `name`, one listed in TF_STATE, of a TF object (default
  if it has none: another object, or a TF that dropped it)."""
  assert name in _TF_STATE_NAMES, f'{name} is not in tf_internals.TF_STATE'
  return getattr(obj, name, default)


def set_tf_state(obj, name, value):
  """Sets private attribute `name`, one listed in TF_STATE, of a TF object."""
  assert name in _TF_STATE_NAMES, f'{name} is not in tf_internals.TF_STATE'
  setattr(obj, name, value)


# The timer of a hook that acts only at end (TF's hooks hold one; subclasses
# call its methods): not exported by `tf.compat.v1.train`.
NeverTriggerTimer = _tf_hooks.NeverTriggerTimer


def graph_element(graph, name):
  """The element of `graph` a name stands for, as TF1's hooks took it in
  `begin()`: an op's name ('xent') is its sole output ('xent:0'); KeyError for
  a name the graph lacks, ValueError for an op of several outputs."""
  with graph.as_default():
    return _tf_hooks._as_graph_element(name)  # pylint: disable=protected-access


def timer_arguments(timer):
  """`(every_secs, every_steps)` of a TF hook's timer; both None if it never triggers."""
  if isinstance(timer, _tf_hooks.NeverTriggerTimer):
    return None, None
  return tf_state(timer, '_every_secs'), tf_state(timer, '_every_steps')


# Checkpointing: every checkpointable object derives from Trackable.
Trackable = tf.__internal__.tracking.Trackable
AutoTrackable = tf.__internal__.tracking.AutoTrackable


def saves_itself_as_read(trackable):
  """Whether a trackable saves only its children (no tensors of its own, no
  saveables, not an optimizer with slots): TF's base methods not overridden."""
  base, cls = Trackable, type(trackable)
  return (cls._serialize_to_tensors is base._serialize_to_tensors and  # pylint: disable=protected-access
          cls._gather_saveables_for_checkpoint is base._gather_saveables_for_checkpoint and  # pylint: disable=protected-access
          '_serialize_to_tensors' not in getattr(trackable, '__dict__', {}) and
          not hasattr(cls, 'get_slot_names'))  # slot variables are not children


# ---------------------------------------------------------------- gradients

def _custom_gradients():
  """TF's registry of gradient functions, where `tf.custom_gradient` in graph
  mode registers one per use ('CustomGradient-<uid>') and never removes it."""
  registry = getattr(getattr(_ops, '_gradient_registry', None), '_registry', None)
  return registry if isinstance(registry, dict) else None


@contextlib.contextmanager
def custom_gradients_registered(registered):
  """Adds to the set `registered` the names of the custom gradients that the
  graphs traced in the block register.

  A function traced under a tf.distribute strategy (whose `all_reduce` is a
  `tf.custom_gradient`) registers a closure that holds its whole FuncGraph, and
  with it every captured resource, tf.data iterators included, until the
  process ends: the iterators were then destroyed in the interpreter's
  teardown, where each waited for tf.data's threads (up to minutes). Without
  the registry (a later TF) nothing is noted.
  """
  gradients = _custom_gradients()
  before = set(gradients) if gradients is not None else None
  try:
    yield
  finally:
    if before is not None:
      registered.update(name for name in gradients
                        if name not in before and name.startswith('CustomGradient-'))


def forget_custom_gradients(names):
  """Removes the named custom gradients from TF's registry: nothing will ask
  for the gradients of the graphs that registered them any more. Returns
  whether any was removed."""
  gradients = _custom_gradients()
  removed = False
  for name in list(names) if gradients is not None else ():
    removed = gradients.pop(name, None) is not None or removed
  return removed


def custom_gradient_names():
  """The names of every custom gradient TF's registry holds."""
  gradients = _custom_gradients()
  return [name for name in gradients or () if name.startswith('CustomGradient-')]


# ---------------------------------------------------------------- the rest

def import_event(serialized_event):
  """Writes a serialized `Event` to the default summary writer: tf.summary has
  no public call for session logs (a `SessionLog.START`). Without it, nothing is
  written (TensorBoard then keeps what a resumed run superseded)."""
  write = getattr(_summary_ops_v2, 'import_event', None)
  if write is not None:
    write(tf.constant(serialized_event))


# Resources a graph's ops make (lookup tables), tracked for a SavedModel.
ResourceTracker = _resource.ResourceTracker
resource_tracker_scope = _resource.resource_tracker_scope


def load_and_remap_matrix_initializer(**kwargs):
  """TF's initializer warm-starting a matrix with a remapped vocabulary, the one
  `tf.compat.v1.train.warm_start` uses."""
  return _checkpoint_ops._load_and_remap_matrix_initializer(**kwargs)  # pylint: disable=protected-access


def wait_at_barrier(name, timeout_ms):
  """Waits until every worker of the cluster reaches barrier `name`:
  tf.distribute has no public barrier."""
  _context.context().wait_at_barrier(name, timeout_ms)


def trace_event_counts(logdir):
  """How many events of each name the TF2 profiler traces under `logdir` hold
  (`*.xplane.pb`, read with TF's own proto: there is no public reader), as a
  `collections.Counter`; None if TensorFlow no longer ships the proto."""
  try:
    xplane_pb2 = importlib.import_module('tensorflow.tsl.profiler.protobuf.xplane_pb2')
  except ImportError:
    return None
  counts = collections.Counter()
  for root, _, files in os.walk(logdir):
    for name in files:
      if not name.endswith('.xplane.pb'):
        continue
      space = xplane_pb2.XSpace()
      with open(os.path.join(root, name), 'rb') as f:
        space.ParseFromString(f.read())
      for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
          counts.update(names.get(event.metadata_id, '') for event in line.events)
  return counts
