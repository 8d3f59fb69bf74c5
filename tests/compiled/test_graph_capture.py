"""What the graph capture does with the TensorFlow internals it stands on
(tests/test_tf_internals.py checks each is there): TF1's seeds, tensor
equality inside the graph, partitioned variables' slices, and the way to
tf_keras' v1 layers."""

import importlib
import threading

import numpy as np
import pytest
import tensorflow as tf

import tfmon


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


def test_a_graph_seed_gives_initial_values_and_random_ops_tf1s_values():
  # Initializers run eagerly, as variables are made: graph_capture seeds them
  # with the graph's seed and op count (eager context internals), as TF1's
  # graph did. Eager random kernels are cached by their seeds and move on: a
  # second graph of the same seed in the process computes them in a function.
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


def test_tf_keras_layers_and_their_slots_get_tf1s_names():
  # tf_keras makes weights eagerly under init_scope, in a name scope TF1's
  # init_scope kept: a Sequential's inner layers are 'sequential/dense/...'.
  tf_keras = pytest.importorskip('tf_keras')

  def build():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    sequential = tf_keras.Sequential([tf_keras.layers.Dense(3),
                                      tf_keras.layers.BatchNormalization(),
                                      tf_keras.layers.Dense(2, name='hidden')])
    y = sequential(x)
    sequential(x)  # called again: the same weights
    inputs = tf_keras.Input((2,))
    z = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(inputs))(y)
    with tf.compat.v1.variable_scope('scope'):
      a = tf_keras.layers.Dense(2)(z)
      b = tf.compat.v1.layers.dense(z, 2)
    with tf.name_scope('names'):
      c = tf_keras.layers.Dense(2, name='inner')(z)
    loss = tf.reduce_sum(a) + tf.reduce_sum(b) + tf.reduce_sum(c)
    tf.compat.v1.train.AdamOptimizer().minimize(loss)
    return sorted(v.name for v in tf.compat.v1.global_variables())

  with tfmon.Graph().as_default():  # first: it routes v1 layers to tf_keras
    ours = build()
  with tf.Graph().as_default():
    tf1 = build()
  assert 'sequential/dense/kernel:0' in tf1 and 'sequential/hidden/bias/Adam:0' in tf1
  assert ours == tf1


# First values of each variable under TF 2.15 with `disable_v2_behavior()`
# (TF1's behaviour there; with v2 behaviour on, TF 2.15's layers ignored the
# graph seed and drew differently every run): the build in the test below, run
# as `tf.compat.v1.layers`, `tf.keras` and `tf.Graph` in TF 2.15.1.
_TF215_FIRST_VALUES = {
    'conv/kernel:0': [0.239218, -0.397924, -0.038835],
    'hidden/kernel:0': [-0.147168, -0.061646, -0.037068],
    'sequential/dense/kernel:0': [0.876904, -0.897406, 0.747386],
    'sequential/dense_1/kernel:0': [-0.667547, 0.085335, -0.99236],
    'logits/kernel:0': [0.898794, -1.219435, 1.027443],
}


def test_v1_and_tf_keras_layers_start_from_tf1s_values_under_a_graph_seed():
  tf_keras = pytest.importorskip('tf_keras')
  v1 = tf.compat.v1
  with tfmon.Graph().as_default():
    v1.set_random_seed(7)
    x = v1.placeholder(tf.float32, [None, 4, 4, 1])
    conv = v1.layers.conv2d(x, 2, 3, name='conv')
    dropped = v1.layers.dropout(conv, 0.5, training=True)  # a seeded op between
    hidden = v1.layers.dense(v1.layers.flatten(dropped), 3, name='hidden',
                             kernel_initializer=v1.truncated_normal_initializer(stddev=0.1))
    model = tf_keras.Sequential([tf_keras.layers.Dense(3, kernel_initializer='he_normal'),
                                 tf_keras.layers.Dense(2)])
    v1.layers.dense(model(hidden), 2, name='logits')
    with tfmon.train.Session() as sess:
      sess.run(v1.global_variables_initializer())
      values = {v.name: sess.run(v).ravel()[:3] for v in v1.global_variables()}
  for name, expected in _TF215_FIRST_VALUES.items():
    np.testing.assert_allclose(values[name], expected, atol=1e-6, err_msg=name)


def test_a_seeded_tf_keras_initializer_keeps_its_own_values():
  tf_keras = pytest.importorskip('tf_keras')
  initializer = tf_keras.initializers.GlorotUniform(seed=3)
  expected = initializer([3, 2]).numpy()
  with tfmon.Graph().as_default():
    tf.compat.v1.set_random_seed(7)
    layer = tf_keras.layers.Dense(2, kernel_initializer=tf_keras.initializers.GlorotUniform(seed=3))
    layer(tf.compat.v1.placeholder(tf.float32, [None, 3]))
  np.testing.assert_allclose(layer.kernel.numpy(), expected)


def test_what_writes_return_is_of_the_graph_and_named_as_tf1s():
  # TF makes the value a write returns (`_UnreadVariable`) eager when the
  # variable is, as a captured graph's are; hooks assert on its `.graph` and
  # use its name (tensorflow/estimator's kmeans hook), and fetch it.
  def build():
    total = tf.compat.v1.get_variable('total', initializer=1.0)
    counts = tf.compat.v1.get_variable('counts', initializer=[1.0, 2.0])
    writes = [tf.compat.v1.assign(total, 5.0), tf.compat.v1.assign_add(total, 1.0),
              tf.compat.v1.assign_sub(total, 2.0),
              tf.compat.v1.scatter_update(counts, [0], [7.0])]
    return writes, writes[1] * 2

  def described(graph, writes):
    assert all(write.graph is graph for write in writes)
    return [(write.name, write.op.name, write.op.type) for write in writes]

  def run(sess, writes, doubled):
    return [sess.run(write) for write in writes] + [sess.run(doubled)]

  with tf.Graph().as_default() as graph:
    writes, doubled = build()
    tf1_names = described(graph, writes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf1_values = run(sess, writes, doubled)
  assert tf1_names[1] == ('AssignAddVariableOp', 'AssignAddVariableOp', 'AssignAddVariableOp')
  for session in (tf.compat.v1.Session, tfmon.train.MonitoredSession):
    with tfmon.Graph().as_default() as graph:
      writes, doubled = build()
      assert described(graph, writes) == tf1_names
      with session() as sess:
        values = run(sess, writes, doubled)
    for value, tf1_value in zip(values, tf1_values):
      np.testing.assert_array_equal(value, tf1_value)


def test_variables_made_in_graph_code_take_its_name_scope_as_in_tf1():
  # tf.Variable takes the name scope; get_variable only the variable scope.
  def build():
    with tf.name_scope('dnn'):
      with tf.compat.v1.name_scope('head'):
        plain = tf.Variable(1.0, name='plain')
        unnamed = tf.compat.v1.Variable(2.0)
        by_scope = tf.compat.v1.get_variable('by_scope', [1])
    with tf.compat.v1.variable_scope('scope'):
      in_scope = tf.Variable(1.0, name='in_scope')
    return [v.name for v in (plain, unnamed, by_scope, in_scope)]

  with tfmon.Graph().as_default():
    ours = build()
  with tf.Graph().as_default():
    tf1 = build()
  assert tf1 == ['dnn/head/plain:0', 'dnn/head/Variable:0', 'by_scope:0',
                 'scope/in_scope:0']
  assert ours == tf1
