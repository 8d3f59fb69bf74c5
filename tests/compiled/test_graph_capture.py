"""The TensorFlow internals the graph capture stands on: each fails loudly here
if a TensorFlow upgrade removes it (they are used only in graph_capture.py)."""

import importlib
import sys
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import wrap_function
from tensorflow.python.framework import func_graph

import tfmon


def test_wrap_functions_variable_holder_and_prune_exist():
  assert callable(wrap_function.VariableHolder(share_variables=False).variable_creator_scope)
  assert callable(getattr(wrap_function.WrappedFunction, 'prune'))
  assert issubclass(tfmon.Graph, func_graph.FuncGraph)


def test_tensor_equality_flag_and_tf_keras_modules_exist():
  assert isinstance(getattr(tf.Tensor, '_USE_EQUALITY'), bool)
  assert 'tensorflow._api.v2.compat.v1' in sys.modules  # where tf.compat.v1.layers lives
  try:
    import tf_keras  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return
  layers = importlib.import_module('tf_keras.api._v1.keras.__internal__.legacy.layers')
  assert callable(layers.dense)
  rnn_cell = importlib.import_module('tf_keras.api._v1.keras.__internal__.legacy.rnn_cell')
  assert callable(rnn_cell.GRUCell)
  utils = importlib.import_module('tf_keras.src.engine.base_layer_utils')
  assert hasattr(utils.call_context(), 'in_call')


def test_func_graph_op_creation_hook_exists():
  assert callable(getattr(func_graph.FuncGraph, '_create_op_internal'))


def test_graph_tensors_are_hashable_inside_the_graph_only():
  with tfmon.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [], name='x')
    assert {x: 1.0}[x] == 1.0  # feed_dict={x: ...}, as TF1 code writes it
  assert tf.Tensor._USE_EQUALITY  # TF2's equality is back outside


def test_v1_layers_without_tf_keras_say_how_to_install_it(monkeypatch):
  import pytest  # pylint: disable=g-import-not-at-top
  from tfmon.compiled import graph_capture  # pylint: disable=g-import-not-at-top
  real_find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *args: (
      None if name == 'tf_keras' else real_find_spec(name, *args)))
  stand_in = graph_capture._V1LayersOnFirstUse('tf.compat.v1.layers')  # pylint: disable=protected-access
  with pytest.raises(ImportError, match=r'tf.compat.v1.layers.dense needs the tf_keras '
                     r'package.*pip install --no-deps tf_keras'):
    stand_in.dense  # pylint: disable=pointless-statement


def test_moving_averages_checks_eager_mode_through_its_ops_module():
  # graph_capture lets ExponentialMovingAverage average tensors, as TF1 did, by
  # answering this one check as TF1's graph mode would.
  from tensorflow.python.training import moving_averages  # pylint: disable=g-import-not-at-top
  assert callable(moving_averages.ops.executing_eagerly_outside_functions)


def test_init_from_checkpoint_leaves_its_initializer_in_initializer_op(tmp_path):
  # Graph.checkpoint_initializers finds what init_from_checkpoint made there.
  checkpoint = tf.train.Checkpoint(v=tf.Variable([1.0]))
  path = checkpoint.write(str(tmp_path / 'ckpt'))
  with tfmon.Graph().as_default() as graph:
    variable = tf.compat.v1.get_variable('w', [1])
    tf.compat.v1.train.init_from_checkpoint(path, {'v/.ATTRIBUTES/VARIABLE_VALUE': 'w'})
    assert graph.checkpoint_initializers() == [variable._initializer_op]  # pylint: disable=protected-access


def test_ops_take_control_inputs_and_conds_list_their_read_only_handles():
  # graph_capture orders reads of a variable before its writes with these.
  assert callable(tf.Operation._add_control_input)  # pylint: disable=protected-access
  with tfmon.Graph().as_default() as graph:
    variable = tf.compat.v1.get_variable('v', [], initializer=tf.compat.v1.zeros_initializer())
    flag = tf.compat.v1.placeholder(tf.bool, [])
    tf.cond(flag, variable.read_value, lambda: tf.constant(0.0))
    cond = next(op for op in graph.get_operations() if op.type in ('If', 'StatelessIf'))
    assert list(cond.get_attr('_read_only_resource_inputs')) == [
        i for i, t in enumerate(cond.inputs) if t.dtype == tf.resource]


def test_a_graph_seed_gives_initial_values_and_random_ops_tf1s_values():
  # Initializers run eagerly, as variables are made: graph_capture seeds them
  # with the graph's seed and op count (eager context internals), as TF1's
  # graph did. Eager random kernels are cached by their seeds and move on: a
  # second graph of the same seed in the process computes them in a function.
  from tfmon.compiled import graph_capture  # pylint: disable=g-import-not-at-top
  assert graph_capture._CAN_SEED  # pylint: disable=protected-access

  def build():
    tf.compat.v1.set_random_seed(20261126)
    x = tf.compat.v1.placeholder(tf.float32, [2, 4])
    weights = tf.compat.v1.get_variable('weights', [4, 3])  # glorot_uniform
    bias = tf.compat.v1.get_variable(
        'bias', [3], initializer=tf.compat.v1.truncated_normal_initializer())
    dropped = tf.compat.v1.nn.dropout(tf.matmul(x, weights) + bias, rate=0.5)
    return [weights, bias, dropped, tf.random.uniform([3])], {x: np.ones((2, 4))}

  with tf.Graph().as_default():
    fetches, feeds = build()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf1_values = sess.run(fetches, feeds)
  for _ in range(2):  # a second graph of the seed too
    with tfmon.Graph().as_default():
      fetches, feeds = build()
      with tfmon.train.MonitoredSession() as sess:
        values = sess.run(fetches, feeds)
    for value, tf1_value in zip(values, tf1_values):
      np.testing.assert_array_equal(value, tf1_value)


def test_seeded_graphs_built_in_threads_leave_the_eager_seed_as_it_was():
  # Initializers see the graph's seed through the process's eager context,
  # swapped in and back per variable: two threads at once must not leave
  # either graph's seed behind.
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  before = context.global_seed()

  def build(seed):
    with tfmon.Graph().as_default():
      tf.compat.v1.set_random_seed(seed)
      for i in range(60):
        tf.compat.v1.get_variable(f'v{i}', [2])

  threads = [threading.Thread(target=build, args=(seed,)) for seed in (11, 12, 13)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert context.global_seed() == before


def test_a_partitioned_variables_parts_say_which_slice_of_the_whole_they_are():
  # checkpointing restores each part from a TF1 checkpoint's whole tensor by it.
  from tfmon.compiled import graph_capture  # pylint: disable=g-import-not-at-top
  with tfmon.Graph().as_default():
    whole = tf.compat.v1.get_variable(
        'emb', [10, 4], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    parts = list(whole)
  assert [graph_capture.slice_of_whole(part) for part in parts] == [
      ('emb', (slice(0, 5), slice(0, 4))), ('emb', (slice(5, 10), slice(0, 4)))]
  assert graph_capture.slice_of_whole(tf.Variable(1.0)) is None
