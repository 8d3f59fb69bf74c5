"""The TensorFlow internals the graph capture stands on: each fails loudly here
if a TensorFlow upgrade removes it (they are used only in graph_capture.py)."""

import tensorflow as tf
from tensorflow.python.eager import wrap_function
from tensorflow.python.framework import func_graph

import tfmon


def test_wrap_functions_variable_holder_and_prune_exist():
  assert callable(wrap_function.VariableHolder(share_variables=False).variable_creator_scope)
  assert callable(getattr(wrap_function.WrappedFunction, 'prune'))
  assert issubclass(tfmon.Graph, func_graph.FuncGraph)


def test_tensor_equality_and_the_v1_layers_loader_flags_exist():
  assert isinstance(getattr(tf.Tensor, '_USE_EQUALITY'), bool)
  assert isinstance(getattr(tf.compat.v1.layers, '_tfll_initialized'), bool)


def test_graph_tensors_are_hashable_inside_the_graph_only():
  with tfmon.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [], name='x')
    assert {x: 1.0}[x] == 1.0  # feed_dict={x: ...}, as TF1 code writes it
  assert tf.Tensor._USE_EQUALITY  # TF2's equality is back outside
