"""Canaries: every TensorFlow internal in tfmon/tf_internals.py, checked to be
there and to mean what tfmon takes it to mean. A TensorFlow upgrade that
removes or renames one fails here, by name, rather than somewhere in a run.

Each test names the entry it guards. The rest of the package may touch no
`tensorflow.python` module, no `tf.__internal__` name and no private attribute
of a TF object: `test_no_other_module_touches_tensorflow_internals` checks so.
"""

import ast
import importlib
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon import tf_internals


def _numbers():
  return np.arange(4, dtype=np.float32).reshape(2, 2)


def test_flat_caller_runs_a_concrete_function_as_one_op():
  @tf.function
  def double(x):
    return {'y': 2 * x, 'none': None}

  concrete = double.get_concrete_function(tf.TensorSpec([2, 2], tf.float32))
  assert tf_internals.flat_caller(concrete).__closure__ is not None
  for name in ('_captured_inputs', '_inference_function', '_call_flat'):
    assert hasattr(concrete, name), name
  from tensorflow.python.eager import record  # pylint: disable=g-import-not-at-top
  assert callable(record.could_possibly_record)
  [y] = tf_internals.flat_caller(concrete)([tf.constant(_numbers())])
  np.testing.assert_array_equal(y, 2 * _numbers())
  with tf.GradientTape():  # the structured fallback
    [y] = tf_internals.flat_caller(concrete)([tf.constant(_numbers())])
  np.testing.assert_array_equal(y, 2 * _numbers())


def test_flat_caller_names_where_a_failing_op_was_defined():
  @tf.function
  def check(x):
    with tf.control_dependencies([tf.debugging.assert_positive(x, message='not positive')]):
      return tf.identity(x)

  concrete = check.get_concrete_function(tf.TensorSpec([], tf.float32))
  with pytest.raises(tf.errors.InvalidArgumentError, match='not positive'):
    tf_internals.flat_caller(concrete)([tf.constant(-1.0)])


def test_python_function_of_a_bound_tf_function_is_bound():
  class Model:
    @tf.function
    def step(self):
      return 1

  bound = Model().step
  assert tf_internals.python_function(bound)() == 1
  assert getattr(bound, '_python_function', None) is not None


def test_function_graphs_watch_the_variables_they_read_and_keep_collections():
  variable = tf.Variable(1.0)
  seen = {}

  @tf.function
  def step():
    graph = tf.compat.v1.get_default_graph()
    seen['collections'] = tf_internals.collections_of(graph)
    result = variable + 1
    seen['watched'] = list(tf_internals.watched_variables(graph))
    return result

  step()
  assert isinstance(seen['collections'], dict)
  assert any(v is variable for v in seen['watched'])


def test_graph_capture_stands_on_wrap_functions_variable_holder_and_prune():
  assert callable(tf_internals.VariableHolder(share_variables=False).variable_creator_scope)
  assert callable(getattr(tf_internals.WrappedFunction, 'prune'))
  assert issubclass(tfmon.Graph, tf_internals.FuncGraph)
  # tfmon.Graph overrides it to collect Keras layers' updates into UPDATE_OPS.
  assert callable(getattr(tf_internals.FuncGraph, '_create_op_internal'))
  # TF1's Saver.save and restore take only its instances.
  assert tf_internals.SessionInterface is tf.compat.v1.Session.__mro__[2]
  assert issubclass(tfmon.session.RawSession, tf_internals.SessionInterface)


def test_prune_copies_only_the_ops_its_fetches_need():
  # TF's prune, fed an internal tensor, also copies what computes it.
  assert tf_internals.CAN_PRUNE_NEEDED  # lift_to_graph takes op_map
  graph = tfmon.Graph()
  with graph.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [2], name='x')
    upstream = x
    for _ in range(20):
      upstream = tf.sin(upstream)
    middle = tf.identity(upstream, name='middle')
    out = tf.square(middle) + tf.Variable([1.0, 2.0], name='v')
  wrapped = graph.wrapped_function()
  tfs = wrapped.prune([middle], [out])
  ours = tf_internals.prune(wrapped, [middle], [out], {
      id(op) for op in (out.op, out.op.inputs[0].op, out.op.inputs[1].op,
                        out.op.inputs[1].op.inputs[0].op)})
  assert len(ours.graph.get_operations()) < 10 < len(tfs.graph.get_operations())
  value = tf.constant([0.5, 2.0])
  np.testing.assert_allclose(ours(value), tfs(value))


def test_a_graphs_ops_become_a_function_by_tfs_c_api():
  assert tf_internals.CAN_MAKE_C_FUNCTIONS  # TF_GraphToFunction, add_c_function
  graph = tfmon.Graph()
  with graph.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [2], name='x')
    v = tf.Variable([1.0, 2.0], name='v')
    out = x * 3.0 + v
  needed = {id(op) for op in (out.op, out.op.inputs[0].op, out.op.inputs[0].op.inputs[1].op,
                              out.op.inputs[1].op, out.op.inputs[1].op.inputs[0].op)}
  call, release = tf_internals.graph_function_caller(graph, [x], [out], [], needed)
  [value] = call([tf.constant([1.0, 1.0])])
  np.testing.assert_allclose(value, [4.0, 5.0])
  release()


def test_keras_3_has_a_name_path_and_per_process_layer_name_counters():
  keras = pytest.importorskip('keras')
  if not keras.__version__.startswith('3.'):
    pytest.skip('keras is not Keras 3 here')
  from keras.src.backend.common import global_state  # pylint: disable=g-import-not-at-top
  from keras.src.backend.common import name_scope  # pylint: disable=g-import-not-at-top
  assert callable(name_scope.current_path) and callable(global_state.set_global_attribute)
  with name_scope.name_scope('outer'):
    assert tf_internals.keras3_path() == 'outer'
  def number(name):
    return 0 if name == 'dense' else int(name.rsplit('_', 1)[1])

  before = number(keras.layers.Dense(1).name)  # whatever this process counted
  with tf_internals.keras3_names_per_graph():
    assert keras.layers.Dense(1).name == 'dense'
    assert keras.layers.Dense(1).name == 'dense_1'
  assert number(keras.layers.Dense(1).name) == before + 1  # the process's again


def test_mode_switches_switch_modes():
  assert tf_internals.CAN_SWITCH_MODE_FAST  # the eager context's is_eager flag
  with tfmon.Graph().as_default():
    with tf_internals.eager_mode():
      assert tf.executing_eagerly()
      with tf_internals.graph_mode():
        assert not tf.executing_eagerly()
        with tf_internals.eager_mode():
          assert tf.executing_eagerly()
        assert not tf.executing_eagerly()
      assert tf.executing_eagerly()


def test_ops_take_attributes_and_control_inputs_once_built():
  with tfmon.Graph().as_default() as graph:
    first = tf.no_op(name='first')
    table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, -1)
    op = table.resource_handle.op
    from tensorflow.core.framework import attr_value_pb2  # pylint: disable=g-import-not-at-top
    tf_internals.set_attr(op, 'shared_name', attr_value_pb2.AttrValue(s=b'shared'))
    assert op.get_attr('shared_name') == b'shared'
    second = tf.no_op(name='second')
    tf_internals.add_control_input(second, first)
    assert first in second.control_inputs
    del graph


def test_conds_list_their_read_only_handles():
  # graph_capture orders reads of a variable before its writes with these.
  with tfmon.Graph().as_default() as graph:
    variable = tf.compat.v1.get_variable('v', [], initializer=tf.compat.v1.zeros_initializer())
    flag = tf.compat.v1.placeholder(tf.bool, [])
    tf.cond(flag, variable.read_value, lambda: tf.constant(0.0))
    cond = next(op for op in graph.get_operations() if op.type in ('If', 'StatelessIf'))
    assert list(cond.get_attr('_read_only_resource_inputs')) == [
        i for i, t in enumerate(cond.inputs) if t.dtype == tf.resource]


def test_init_from_checkpoint_leaves_its_initializer_in_initializer_op(tmp_path):
  checkpoint = tf.train.Checkpoint(v=tf.Variable([1.0]))
  path = checkpoint.write(str(tmp_path / 'ckpt'))
  with tfmon.Graph().as_default() as graph:
    variable = tf.compat.v1.get_variable('w', [1])
    tf.compat.v1.train.init_from_checkpoint(path, {'v/.ATTRIBUTES/VARIABLE_VALUE': 'w'})
    initializer = tf_internals.initializer_op(variable)
    assert isinstance(initializer, tf.Operation) and initializer.graph is graph
    assert graph.checkpoint_initializers() == [initializer]


def test_partitioned_parts_carry_their_save_slice_info():
  with tfmon.Graph().as_default():
    whole = tf.compat.v1.get_variable(
        'emb', [10, 4], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    info = tf_internals.save_slice_info(list(whole)[1])
  assert (info.full_name, list(info.var_offset), list(info.var_shape)) == (
      'emb', [5, 0], [5, 4])
  assert tf_internals.save_slice_info(tf.Variable(1.0)) is None


def test_tensor_equality_flag_exists():
  assert isinstance(getattr(tf.Tensor, '_USE_EQUALITY'), bool)
  assert tf_internals.tensor_equality_on()


def test_the_eager_seed_and_graph_op_counts_can_be_swapped():
  assert tf_internals.CAN_SEED
  counts = tf_internals.graph_op_seed_counts()  # a WeakKeyDictionary
  assert callable(counts.get) and callable(counts.setdefault)

  drawn = []

  class Seeds:
    def randint(self, low, high):
      drawn.append((low, high))
      return 7

  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  before = context.global_seed()
  with tf_internals.eager_seed(3, Seeds()):
    assert context.global_seed() == 3
    tf.random.uniform([2])  # an op with no seed of its own draws one
  assert len(drawn) == 1 and context.global_seed() == before


def test_moving_averages_checks_eager_mode_through_its_ops_module():
  assert tf_internals.CAN_AVERAGE_TENSORS
  from tensorflow.python.training import moving_averages  # pylint: disable=g-import-not-at-top
  before = moving_averages.ops
  with tf_internals.moving_averages_as_in_tf1_graph():
    assert not moving_averages.ops.executing_eagerly_outside_functions()
    assert moving_averages.ops.convert_to_tensor is before.convert_to_tensor
  assert moving_averages.ops is before


def test_v1_keras_modules_are_lazy_in_tensorflow_and_in_tf_keras():
  holders, attribute = tf_internals.v1_keras_module_holders('tf.compat.v1.layers')
  assert holders[0] is tf.compat.v1 and attribute == 'layers'
  assert 'tensorflow._api.v2.compat.v1' in sys.modules
  assert tf_internals.is_lazy_keras_module(
      getattr(sys.modules['tensorflow._api.v2.compat.v1'], 'layers')) or (
          hasattr(tf.compat.v1.layers, 'dense'))
  pytest.importorskip('tf_keras')
  assert callable(tf_internals.tf_keras_v1_module('tf.compat.v1.layers').dense)
  assert callable(tf_internals.tf_keras_v1_module('tf.compat.v1.nn.rnn_cell').GRUCell)
  utils = importlib.import_module('tf_keras.src.engine.base_layer_utils')
  assert hasattr(utils.call_context(), 'in_call')
  assert not tf_internals.in_tf_keras_layer_call()



def test_keras_lazy_loaders_pick_their_package_on_first_use_and_can_take_tf_keras():
  pytest.importorskip('tf_keras')
  from tensorflow.python.util import lazy_loader  # pylint: disable=g-import-not-at-top
  tf_internals.route_keras_loaders_to_tf_keras()
  # Made as TensorFlow's API module makes them; a script may hold one.
  parent = {}
  layers = lazy_loader.KerasLazyLoader(
      parent, submodule='__internal__.legacy.layers', name='layers', mode='v1')
  rnn_cell = lazy_loader.KerasLazyLoader(
      parent, submodule='__internal__.legacy.rnn_cell', name='rnn_cell', mode='v1')
  assert tf_internals.is_lazy_keras_module(layers)
  assert not vars(layers)['_tfll_initialized']
  tf_keras_layers = tf_internals.tf_keras_v1_module('tf.compat.v1.layers')
  assert layers.dense is tf_keras_layers.dense and parent['layers'] is tf_keras_layers
  assert rnn_cell.GRUCell is tf_internals.tf_keras_v1_module('tf.compat.v1.nn.rnn_cell').GRUCell
  keras = lazy_loader.KerasLazyLoader({}, mode='v2')  # other loaders: TF's routing
  assert keras.layers.Dense.__module__.startswith('keras.')



def test_datasets_built_in_functions_take_dummy_resources_one_shot_iterators_copy():
  tf_internals.let_one_shot_iterators_capture_dummy_dataset_resources()

  def make():
    dataset = tf.data.Dataset.range(4).cache().shuffle(4, seed=1)
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

  wrapped = tf.compat.v1.wrap_function(make, [])  # a function graph, as tfmon.Graph
  types = {op.type for op in wrapped.graph.get_operations()}
  assert {'DummySeedGenerator', 'DummyMemoryCache', 'OneShotIterator'} <= types
  from tensorflow.python.data.util import traverse  # pylint: disable=g-import-not-at-top
  assert {'DummySeedGenerator', 'DummyMemoryCache'} <= set(traverse.OP_TYPES_ALLOWLIST)


def _instances():
  """One object of each class in TF_STATE, made as TF1 code makes it."""
  hooks = tf.compat.v1.train
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    loss = tf.constant(1.0)
    summary = tf.compat.v1.summary.scalar('loss', loss)
    saver = tf.compat.v1.train.Saver([step])
    yield hooks.StopAtStepHook(num_steps=3)
    yield hooks.LoggingTensorHook({'loss': loss}, every_n_iter=1)
    yield hooks.StepCounterHook(every_n_steps=1, output_dir='/tmp/unused')
    yield hooks.CheckpointSaverHook('/tmp/unused', save_steps=1, saver=saver)
    yield hooks.SummarySaverHook(save_steps=1, output_dir='/tmp/unused', summary_op=summary)
    yield hooks.NanTensorHook(loss)
    yield hooks.FinalOpsHook(loss)
    yield hooks.GlobalStepWaiterHook(1)
    yield hooks.ProfilerHook(save_steps=1, output_dir='/tmp/unused')
    yield hooks.Scaffold(saver=saver)
    yield saver
    yield hooks.SecondOrStepTimer(every_steps=1)
  yield tf.train.CheckpointManager(tf.train.Checkpoint(), '/tmp/unused', 1)


def test_every_private_attribute_read_of_tfs_own_objects_exists():
  made = list(_instances())
  for cls, names in tf_internals.TF_STATE.items():
    instance = next(obj for obj in made if type(obj) is cls)
    for name in names:
      if cls is tf.compat.v1.train.FinalOpsHook and name == '_final_ops_values':
        continue  # set by tfmon, read back by TF's `final_ops_values`
      assert hasattr(instance, name), f'{cls.__name__}.{name}'
  timer = tf.compat.v1.train.SecondOrStepTimer(every_steps=5)
  assert tf_internals.timer_arguments(timer) == (None, 5)
  with pytest.raises(AssertionError, match='not in tf_internals.TF_STATE'):
    tf_internals.tf_state(timer, '_last_triggered_step')


def test_final_ops_hook_reports_the_values_tfmon_sets():
  with tf.Graph().as_default():
    hook = tf.compat.v1.train.FinalOpsHook(tf.constant(1.0))
  tf_internals.set_tf_state(hook, '_final_ops_values', 5.0)
  assert hook.final_ops_values == 5.0


def test_trackables_derive_from_one_base_and_save_through_its_methods():
  assert isinstance(tf.Variable(1.0), tf_internals.Trackable)
  assert isinstance(tf.train.Checkpoint(), tf_internals.Trackable)
  assert isinstance(tf_internals.AutoTrackable(), tf_internals.Trackable)
  assert tf_internals.saves_itself_as_read(tf.Module())
  assert not tf_internals.saves_itself_as_read(tf.Variable(1.0))
  assert not tf_internals.saves_itself_as_read(tf.compat.v1.train.MomentumOptimizer(0.1, 0.9))


def test_import_event_writes_a_raw_event(tmp_path):
  from tensorboard.backend.event_processing import event_file_loader  # pylint: disable=g-import-not-at-top
  from tensorflow.core.util import event_pb2  # pylint: disable=g-import-not-at-top
  writer = tf.summary.create_file_writer(str(tmp_path))
  event = event_pb2.Event(step=4, session_log=event_pb2.SessionLog(
      status=event_pb2.SessionLog.START))
  with writer.as_default():
    tf_internals.import_event(event.SerializeToString())
  writer.close()
  [path] = tmp_path.iterdir()
  events = list(event_file_loader.LegacyEventFileLoader(str(path)).Load())
  assert any(e.step == 4 and e.session_log.status == event_pb2.SessionLog.START
             for e in events)


def test_the_resource_tracker_finds_the_tables_a_block_makes():
  tracker = tf_internals.ResourceTracker()
  with tf_internals.resource_tracker_scope(tracker):
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(['a'], [1]), default_value=-1)
  assert table in tracker.resources


def test_the_warm_start_remapping_initializer_exists():
  assert callable(tf_internals._checkpoint_ops._load_and_remap_matrix_initializer)  # pylint: disable=protected-access


def test_the_eager_context_has_a_cluster_barrier():
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  assert callable(context.context().wait_at_barrier)


def test_no_other_module_touches_tensorflow_internals():
  package = pathlib.Path(tfmon.__file__).parent
  offenders = []
  for path in package.rglob('*.py'):
    if path.name == 'tf_internals.py':
      continue
    source = path.read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('tensorflow.python'):
        offenders.append(f'{path.relative_to(package)}:{node.lineno} imports {node.module}')
      if isinstance(node, ast.Import):
        offenders += [f'{path.relative_to(package)}:{node.lineno} imports {a.name}'
                      for a in node.names if a.name.startswith('tensorflow.python')]
      if isinstance(node, ast.Attribute) and node.attr == '__internal__':
        offenders.append(f'{path.relative_to(package)}:{node.lineno} uses tf.__internal__')
  assert not offenders, offenders


def test_custom_gradients_traced_in_graph_mode_are_registered_and_can_be_forgotten():
  @tf.custom_gradient
  def double(x):
    return 2 * x, lambda dy: 2 * dy

  registered = set()
  with tf_internals.custom_gradients_registered(registered):
    tf.function(double).get_concrete_function(tf.TensorSpec([], tf.float32))
  assert len(registered) == 1 and next(iter(registered)).startswith('CustomGradient-')
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  assert registered <= set(ops._gradient_registry._registry)  # pylint: disable=protected-access
  assert registered <= set(tf_internals.custom_gradient_names())
  assert tf_internals.forget_custom_gradients(registered)
  assert not registered & set(ops._gradient_registry._registry)  # pylint: disable=protected-access


def test_a_queue_of_a_captured_graph_is_eager_and_named_by_tfs_own_name():
  # TF2's queues make their resource under init_scope: eager in a tfmon.Graph.
  with tfmon.Graph().as_default():
    queue = tf.compat.v1.FIFOQueue(10, tf.float32)
    assert isinstance(queue.queue_ref, tf.__internal__.EagerTensor)
    assert isinstance(queue.name, str)  # tf_internals.let_queues_of_captured_graphs_be_named
  with tf.Graph().as_default():
    assert tf.compat.v1.FIFOQueue(10, tf.float32, name='fifo').name == 'fifo'


def test_a_session_can_be_made_the_default_one():
  sentinel = object()
  with tf_internals.default_session(sentinel):
    assert tf.compat.v1.get_default_session() is sentinel
  assert tf.compat.v1.get_default_session() is not sentinel


def test_writes_of_resource_variables_return_what_lazy_read_makes():
  # graph_capture gives it TF1's graph and name through ResultsOfWrites.
  seen = []

  class Seen(tf_internals.ResultsOfWrites):
    def _tfmon_result_of_write(self, result, op):
      seen.append(op.type)
      return result

  with tfmon.Graph().as_default():
    variable = tf.compat.v1.get_variable('v', initializer=[1.0, 2.0])
    variable.__class__ = type('Seen', (Seen, type(variable)), {})
    tf.compat.v1.assign_add(variable, [1.0, 1.0])
    tf.compat.v1.scatter_update(variable, [0], [3.0])
  assert seen == ['AssignAddVariableOp', 'ResourceScatterUpdate']


def test_what_a_write_returns_knows_its_write_op():
  with tfmon.Graph().as_default() as graph:
    variable = tf.compat.v1.get_variable('v', [], initializer=tf.compat.v1.zeros_initializer())
    result = tf.compat.v1.assign_add(variable, 1.0)
    assert tf_internals.write_of(result).graph is graph
    assert tf_internals.write_of(result).type == 'AssignAddVariableOp'
  assert tf_internals.write_of(tf.constant(1.0)) is None


def test_tfs_hooks_never_trigger_timer_and_graph_element_lookup():
  timer = tf_internals.NeverTriggerTimer()
  assert not timer.should_trigger_for_step(10**9)
  assert tf_internals.timer_arguments(timer) == (None, None)
  with tfmon.Graph().as_default() as graph:
    loss = tf.identity(tf.constant(1.0), name='xent')
  assert tf_internals.graph_element(graph, 'xent') is loss
  with pytest.raises(KeyError):
    tf_internals.graph_element(graph, 'missing')


def test_function_graphs_list_call_time_captures_with_their_closures():
  values = iter([3, 4])

  @tf.function
  def add_a_call_time_value(x):
    graph = tf.compat.v1.get_default_graph()
    return x + graph.capture_call_time_value(lambda: next(values),
                                             tf.TensorSpec([], tf.int32))

  graph = add_a_call_time_value.get_concrete_function(tf.TensorSpec([], tf.int32)).graph
  [([placeholder], closure)] = tf_internals.deferred_captures(graph)
  assert placeholder.op.type == 'Placeholder' and placeholder.graph is graph
  [value] = closure()  # called at each call for its values
  assert value == 3


def test_v1_optimizers_scale_a_mean_loss_by_the_replicas_under_estimators_flag():
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  with tf.Graph().as_default(), strategy.scope():
    loss = tf.compat.v1.losses.mean_squared_error([1.], [0.])  # a MEAN reduction
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(1.)
    assert optimizer._scale_loss(loss) is loss  # pylint: disable=protected-access
    assert not tf_internals.loss_scaled_by_optimizer(tf.compat.v1.get_default_graph())
    with tf_internals.scale_loss_as_estimator(strategy):
      assert optimizer._scale_loss(loss) is not loss  # pylint: disable=protected-access
    assert tf_internals.loss_scaled_by_optimizer(tf.compat.v1.get_default_graph())


def test_variable_creators_of_a_lower_priority_run_after_tfs_own():
  order = []

  def creator(name):
    def create(next_creator, **kwargs):
      order.append(name)
      return next_creator(**kwargs)
    return create

  with tf.Graph().as_default():
    with tf_internals.variable_creator_scope(creator('low'), priority=50), \
        tf.variable_creator_scope(creator('public')), \
        tf_internals.variable_creator_scope(creator('high'), priority=200):
      tf.Variable(1.)
  assert order == ['high', 'public', 'low']


def test_profiler_traces_are_read_by_tfs_own_proto(tmp_path):
  @tf.function
  def traced_fn(x):
    return x * 2.0

  tf.profiler.experimental.start(str(tmp_path))
  for _ in range(3):
    traced_fn(tf.constant(1.0)).numpy()
  tf.profiler.experimental.stop()
  counts = tf_internals.trace_event_counts(str(tmp_path))
  assert counts is not None, 'TF moved tensorflow.tsl.profiler.protobuf.xplane_pb2'
  assert sum(n for name, n in counts.items() if 'traced_fn' in name) >= 3
