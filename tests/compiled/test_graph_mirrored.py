"""TF1 graph code built once per replica under MirroredStrategy, on conftest's
two logical CPUs: it trains the weights one device trains on the whole batch."""

import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests import training


def _mirrored():
  return training.mirrored_strategy()


def _adam_graph():
  x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
  w = tf.compat.v1.get_variable('w', [4, 1], initializer=tf.compat.v1.zeros_initializer())
  loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
  global_step = tf.compat.v1.train.get_or_create_global_step()
  return tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss, global_step=global_step)


def _names(variables):
  return [v.name for v in variables]


@pytest.mark.parametrize('strategy_first', [False, True])
def test_each_replicated_variable_is_listed_once_with_adams_slots(strategy_first):
  with tfmon.Graph().as_default():
    _adam_graph()
    single = (_names(tf.compat.v1.global_variables()),
              _names(tf.compat.v1.trainable_variables()))
  strategy = _mirrored()
  graph = tfmon.Graph()
  # The strategy's scope entered before the graph's or inside it: either way
  # the strategy's creator asks the graph's for each replica's variable.
  outer, inner = (strategy.scope(), graph.as_default()) if strategy_first else (
      graph.as_default(), strategy.scope())
  with outer, inner:
    strategy.extended.call_for_each_replica(_adam_graph)
    trainable = tf.compat.v1.trainable_variables()
    replicated = (_names(tf.compat.v1.global_variables()), _names(trainable))
  assert replicated == single == (
      ['w:0', 'global_step:0', 'beta1_power:0', 'beta2_power:0', 'w/Adam:0', 'w/Adam_1:0'],
      ['w:0'])
  [w] = trainable
  assert isinstance(w, tf.distribute.DistributedValues)


_TRUE_WEIGHTS = np.array([[1.], [2.], [3.], [4.]], np.float32)


def _data(rows=64):
  features = np.random.default_rng(0).normal(size=(rows, 4)).astype(np.float32)
  return features, features @ _TRUE_WEIGHTS


def _optimizer(name):
  if name == 'adam':
    return tf.compat.v1.train.AdamOptimizer(0.05)
  return tf.compat.v1.train.GradientDescentOptimizer(0.05)


def _regression(optimizer, x, y):
  """A TF1 linear regression on `x` and `y`: `(loss, train_op)`."""
  w = tf.compat.v1.get_variable('w', [4, 1], initializer=tf.compat.v1.zeros_initializer())
  b = tf.compat.v1.get_variable('b', [1], initializer=tf.compat.v1.zeros_initializer())
  loss = tf.compat.v1.losses.mean_squared_error(y, tf.matmul(x, w) + b)
  tf.compat.v1.summary.scalar('replica_loss', loss)
  global_step = tf.compat.v1.train.get_or_create_global_step()
  return loss, _optimizer(optimizer).minimize(loss, global_step=global_step)


class _Losses(tf.compat.v1.train.SessionRunHook):
  """TF's kind of hook: fetches the loss every run."""

  def __init__(self, loss):
    self._loss = loss
    self.values = []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._loss)

  def after_run(self, run_context, run_values):
    self.values.append(run_values.results)


def _train(graph, loss, train_op, directory, feeds=None, steps=20, **kwargs):
  """Trains with TF's hooks; returns `(weights by name, losses the hook saw)`."""
  losses = _Losses(loss)
  with graph.as_default():
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(directory), save_summaries_steps=5,
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=steps),
               tf.compat.v1.train.NanTensorHook(loss), losses], **kwargs) as sess:
      step = 0
      while not sess.should_stop():
        sess.run(train_op, feed_dict=feeds(step) if feeds else None)
        step += 1
  reader = tf.train.load_checkpoint(str(directory))
  weights = {name: reader.get_tensor(name)
             for name in reader.get_variable_to_shape_map() if name != '_CHECKPOINTABLE_OBJECT_GRAPH'}
  return weights, losses.values


def _assert_same_training(single, mirrored):
  (single_weights, single_losses), (mirrored_weights, mirrored_losses) = single, mirrored
  assert sorted(mirrored_weights) == sorted(single_weights)  # TF1 names, no replica's
  assert not any('replica' in name for name in mirrored_weights)
  for name, value in single_weights.items():
    np.testing.assert_allclose(mirrored_weights[name], value, atol=1e-5, err_msg=name)
  assert single_weights['global_step'] == mirrored_weights['global_step'] == 20
  # The hooks see the loss averaged across replicas: the whole batch's.
  np.testing.assert_allclose(mirrored_losses, single_losses, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('optimizer', ['sgd', 'adam'])
def test_fed_batches_split_across_replicas_train_as_one_device(tmp_path, optimizer):
  features, labels = _data()

  def build():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    y = tf.compat.v1.placeholder(tf.float32, [None, 1], name='y')
    return (x, y) + _regression(optimizer, x, y)

  def feeds(x, y):
    def batch(step):
      start = step * 16 % 64
      return {x: features[start:start + 16], 'y:0': labels[start:start + 16]}  # by name too
    return batch

  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build)
  single = _train(graph, loss, train_op, tmp_path / 'single', feeds(x, y))
  strategy = _mirrored()
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build, strategy=strategy)
  assert graph.strategy is strategy and isinstance(train_op, tf.Operation)
  mirrored = _train(graph, loss, train_op, tmp_path / 'mirrored', feeds(x, y))
  _assert_same_training(single, mirrored)


def test_placeholders_build_did_not_return_are_split_when_fed_by_name(tmp_path):
  # TF1 scripts feed 'x:0': replica 0's placeholder; each replica gets its share.
  features, labels = _data()

  def build():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    y = tf.compat.v1.placeholder(tf.float32, [None, 1], name='y')
    return _regression('sgd', x, y)

  def feeds(step):
    start = step * 16 % 64
    return {'x:0': features[start:start + 16], 'y:0': labels[start:start + 16]}

  graph, (loss, train_op) = tfmon.train.capture_graph(build)
  single = _train(graph, loss, train_op, tmp_path / 'single', feeds)
  graph, (loss, train_op) = tfmon.train.capture_graph(build, strategy=_mirrored())
  _assert_same_training(single, _train(graph, loss, train_op, tmp_path / 'mirrored', feeds))


@pytest.mark.parametrize('optimizer', ['sgd', 'adam'])
def test_datasets_sharded_by_input_context_train_as_one_device(tmp_path, optimizer):
  features, labels = _data()

  def build(input_context=None):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).repeat()
    if input_context is None:
      batches = dataset.batch(16)
    else:  # the i-th of every two batches of 8, as TF distributed a dataset
      batches = dataset.batch(input_context.get_per_replica_batch_size(16)).shard(
          input_context.num_input_pipelines, input_context.input_pipeline_id)
    x, y = tf.compat.v1.data.make_one_shot_iterator(batches).get_next()
    return _regression(optimizer, x, y)

  graph, (loss, train_op) = tfmon.train.capture_graph(build)
  single = _train(graph, loss, train_op, tmp_path / 'single')
  graph, (loss, train_op) = tfmon.train.capture_graph(build, strategy=_mirrored())
  mirrored = _train(graph, loss, train_op, tmp_path / 'mirrored', steps_per_loop=4)
  _assert_same_training(single, mirrored)


def _fed_build(optimizer='sgd'):
  def build():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    y = tf.compat.v1.placeholder(tf.float32, [None, 1], name='y')
    return (x, y) + _regression(optimizer, x, y)
  return build


def _batches(x, y):
  features, labels = _data()

  def batch(step):
    start = step * 16 % 64
    return {x: features[start:start + 16], y: labels[start:start + 16]}
  return batch


def test_one_optimizer_update_per_variable_and_step():
  graph, (x, y, _, train_op) = tfmon.train.capture_graph(_fed_build('adam'),
                                                         strategy=_mirrored())
  applies = [op for op in graph.get_operations() if op.type == 'ResourceApplyAdam']
  # One update of each replica's copy of w and b: 2 variables x 2 replicas.
  assert len(applies) == 4
  assert sorted(op.inputs[0].op.name for op in applies) == [
      'b', 'b/replica_1', 'w', 'w/replica_1']
  with graph.as_default():
    with tfmon.train.MonitoredSession() as sess:
      feeds = _batches(x, y)
      for step in range(3):
        sess.run(train_op, feed_dict=feeds(step))
      global_step = tf.compat.v1.train.get_global_step()
      beta1_power = [v for v in tf.compat.v1.global_variables() if v.name == 'beta1_power:0'][0]
      assert sess.run(global_step) == 3
      # Adam's finish ran once a step: beta1 ** (steps + 1).
      np.testing.assert_allclose(sess.run(beta1_power), 0.9 ** 4, rtol=1e-6)


def test_a_mirrored_checkpoint_restores_into_the_unreplicated_graph(tmp_path):
  build = _fed_build()
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build)
  straight, _ = _train(graph, loss, train_op, tmp_path / 'straight', _batches(x, y))
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build, strategy=_mirrored())
  # 8 steps, two rounds of the 4 batches: the resumed run starts at batch 0.
  _train(graph, loss, train_op, tmp_path / 'resumed', _batches(x, y), steps=8)
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build)
  resumed, _ = _train(graph, loss, train_op, tmp_path / 'resumed', _batches(x, y))
  for name, value in straight.items():
    np.testing.assert_allclose(resumed[name], value, atol=1e-5, err_msg=name)


def test_summaries_and_names_are_replica_zeros():
  graph, _ = tfmon.train.capture_graph(_fed_build(), strategy=_mirrored())
  summaries = graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
  assert [s.op.name for s in summaries] == ['replica_loss']
  assert graph.as_graph_element('x:0') is graph.replica_feeds[id(graph.as_graph_element('x:0'))][0]


def test_a_one_device_strategy_runs_the_graph_on_its_device(tmp_path):
  build = _fed_build()
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(build)
  single = _train(graph, loss, train_op, tmp_path / 'single', _batches(x, y))
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(
      build, strategy=tf.distribute.OneDeviceStrategy('/cpu:1'))
  _assert_same_training(single, _train(graph, loss, train_op, tmp_path / 'one', _batches(x, y)))


def test_a_dataset_every_replica_reads_whole_is_warned_of(caplog):
  def build():
    dataset = tf.data.Dataset.from_tensor_slices(_data()).repeat().batch(8)
    return _regression('sgd', *tf.compat.v1.data.make_one_shot_iterator(dataset).get_next())

  tfmon.train.capture_graph(build, strategy=_mirrored())
  assert 'each of the 2 replicas reads the whole dataset' in caplog.text


def test_strategies_a_graph_was_not_built_under_are_refused_with_the_fix():
  strategy = _mirrored()
  graph, _ = tfmon.train.capture_graph(_fed_build())
  with graph.as_default():
    with pytest.raises(ValueError, match=r'capture_graph\(build, strategy=strategy\)'):
      tfmon.train.MonitoredSession(strategy=strategy)
  graph, _ = tfmon.train.capture_graph(_fed_build(), strategy=strategy)
  with graph.as_default():
    with pytest.raises(ValueError, match='which the captured graph was built under'):
      tfmon.train.MonitoredSession(strategy=_mirrored())
  with pytest.raises(ValueError, match='OneDeviceStrategy or MultiWorkerMirroredStrategy'):
    tfmon.train.capture_graph(_fed_build(), strategy=tf.distribute.get_strategy())


def test_a_batch_smaller_than_the_replicas_is_refused():
  graph, (x, y, _, train_op) = tfmon.train.capture_graph(_fed_build(), strategy=_mirrored())
  with graph.as_default():
    with tfmon.train.MonitoredSession() as sess:
      with pytest.raises(ValueError, match='feed a batch of at least 2 rows'):
        sess.run(train_op, feed_dict={x: np.ones([1, 4]), y: np.ones([1, 1])})


def test_the_all_reduces_custom_gradients_do_not_outlive_the_build():
  before = set(tfmon.tf_internals.custom_gradient_names())
  tfmon.train.capture_graph(_fed_build(), strategy=_mirrored())
  assert set(tfmon.tf_internals.custom_gradient_names()) <= before


def test_tfs_own_monitored_training_session_runs_the_replicated_graph(tmp_path):
  strategy = _mirrored()
  graph, (x, y, loss, train_op) = tfmon.train.capture_graph(_fed_build('adam'),
                                                         strategy=strategy)
  feeds = _batches(x, y)
  with graph.as_default():
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=6)]) as sess:
      step = 0
      while not sess.should_stop():
        sess.run(train_op, feed_dict=feeds(step))
        step += 1
    # tfmon's session takes the strategy the graph was built under.
    with tfmon.train.MonitoredSession(strategy=strategy) as sess:
      assert sess.run(tf.compat.v1.train.get_global_step()) == 6  # eager variables
  assert tf.train.load_checkpoint(str(tmp_path)).get_tensor('global_step') == 6
