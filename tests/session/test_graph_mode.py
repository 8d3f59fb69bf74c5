"""TF1 graph code under `with tfmon.Graph().as_default():` (SPEC section 8)."""

import gc
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import tfmon
from tests.kernels import kernels_run


def _tf1_model():
  """TF1 graph code, unchanged: placeholders, get_variable, a v1 optimizer
  without var_list, a v1 metric and a v1 summary."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
  y = tf.compat.v1.placeholder(tf.int64, [None], name='y')
  weights = tf.compat.v1.get_variable('dense/kernel', [4, 3],
                                      initializer=tf.compat.v1.zeros_initializer())
  logits = tf.matmul(x, weights)
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, logits)
  loss = tf.identity(loss, name='loss')
  tf.compat.v1.summary.scalar('loss_summary', loss)
  _, accuracy_update = tf.compat.v1.metrics.accuracy(y, tf.argmax(logits, 1))
  train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
      loss, global_step=global_step, name='train_op')
  return global_step, x, y, weights, loss, accuracy_update, train_op


def _batch(seed=0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(8, 4)), rng.integers(0, 3, size=8)  # float64, as numpy gives


def test_a_tf1_script_trains_unchanged_with_tf_and_tfmon_hooks(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  with tfmon.Graph().as_default():
    global_step, x, y, weights, loss, accuracy_update, train_op = _tf1_model()
    assert tf.compat.v1.train.get_global_step() is global_step
    assert {v.name for v in tf.compat.v1.global_variables()} >= {
        'global_step:0', 'dense/kernel:0', 'dense/kernel/Momentum:0'}
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=6),   # TF's own objects
             tf.compat.v1.train.NanTensorHook(loss),
             tfmon.train.LoggingTensorHook({'loss': loss, 'step': global_step},
                                           every_n_iter=3)]
    xb, yb = _batch()
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), hooks=hooks, save_checkpoint_steps=3,
        save_summaries_steps=2, log_step_count_steps=None) as sess:
      results = []
      while not sess.should_stop():
        results.append(sess.run([train_op, loss, accuracy_update, 'loss:0'],
                                feed_dict={x: xb, 'y:0': yb}))
  assert len(results) == 6
  assert results[0][0] is None and results[0][1] == results[0][3]
  assert results[-1][1] < results[0][1]  # it trained
  assert int(global_step.numpy()) == 6
  assert weights.dtype == tf.float32  # float64 feeds did not make it float64
  assert 'Graph was finalized.' in caplog.text
  assert 'loss = ' in caplog.text and 'step = 3' in caplog.text
  # TF1's Saver's content, under TF1's keys: slots included, metric variables
  # not, no object graph.
  names = set(dict(tf.train.list_variables(str(tmp_path / 'model.ckpt-6'))))
  assert {'dense/kernel', 'dense/kernel/Momentum', 'global_step'} <= names
  assert not any('accuracy' in n or 'OBJECT_GRAPH' in n for n in names)
  # The graph's summaries, as TF1 wrote them: simple_value scalars.
  accumulator = event_accumulator.EventAccumulator(str(tmp_path))
  accumulator.Reload()
  steps = [event.step for event in accumulator.Scalars('loss_summary')]
  assert steps == [1, 3, 5]


def test_a_tf1_checkpoint_restores_into_the_captured_graph_by_name(tmp_path):
  # Written by TF1's own Saver in TF1 graph mode.
  with tf.Graph().as_default():
    global_step, _, _, weights, _, _, _ = _tf1_model()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run([weights.assign(tf.ones([4, 3])), global_step.assign(7)])
      saver.save(session, str(tmp_path / 'model.ckpt'), global_step=7)
  with tfmon.Graph().as_default():
    global_step, x, y, weights, loss, _, train_op = _tf1_model()
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_summaries_steps=None,
        log_step_count_steps=None) as sess:
      assert int(sess.run(global_step)) == 7
      np.testing.assert_array_equal(sess.run(weights), np.ones([4, 3]))
      xb, yb = _batch()
      sess.run(train_op, feed_dict={x: xb, y: yb})
  assert int(global_step.numpy()) == 8


class _BuildsOpsInBegin(tf.compat.v1.train.SessionRunHook):
  """A TF1 hook as the v1 contract wants: graph ops built in begin(), run when fetched."""

  def __init__(self, logdir):
    self._logdir = logdir

  def begin(self):
    graph = tf.compat.v1.get_default_graph()
    self.graph_was_captured = isinstance(graph, tfmon.Graph)
    self._step = tf.compat.v1.train.get_global_step()
    self._counter = tf.compat.v1.get_variable(
        'hook_counter', [], tf.int64, initializer=tf.compat.v1.zeros_initializer(),
        trainable=False)
    self._increment = tf.compat.v1.assign_add(self._counter, 1)
    self._scale = tf.compat.v1.placeholder(tf.int64, [], name='hook_scale')
    self._scaled = self._counter * self._scale
    self._writer = tf.compat.v1.summary.FileWriter(self._logdir)
    self.step_op_name = self._step.op.name
    self.seen = []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(
        {'inc': self._increment, 'scaled': self._scaled},
        feed_dict={self._scale: 10})

  def after_run(self, run_context, run_values):
    self.seen.append(run_values.results['scaled'])
    self._writer.add_summary(tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag='counter', simple_value=run_values.results['inc'])
    ]), len(self.seen))

  def end(self, session):
    self.final = session.run(self._counter)
    self._writer.close()


def test_hooks_build_graph_ops_in_begin_that_run_when_fetched(tmp_path):
  with tfmon.Graph().as_default():
    _, x, y, _, loss, _, train_op = _tf1_model()
    hook = _BuildsOpsInBegin(str(tmp_path))
    xb, yb = _batch()
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      for _ in range(3):
        sess.run(train_op, feed_dict={x: xb, y: yb})
      sess.run(loss, feed_dict={x: xb, y: yb})  # the hook's op runs here too
  assert hook.graph_was_captured
  assert hook.step_op_name.startswith('global_step')
  # The hook's read and increment in one run are unordered, as in TF1: each
  # run reads the count before or after its own increment, times the fed 10.
  assert all(seen in (10 * run, 10 * (run + 1)) for run, seen in enumerate(hook.seen))
  assert hook.final == 4
  accumulator = event_accumulator.EventAccumulator(str(tmp_path))
  accumulator.Reload()
  assert [e.value for e in accumulator.Scalars('counter')] == [1, 2, 3, 4]


def test_a_hooks_own_run_of_the_loss_never_trains():
  with tfmon.Graph().as_default():
    global_step, x, y, weights, loss, _, train_op = _tf1_model()
    xb, yb = _batch()
    with tfmon.train.MonitoredSession() as sess:
      sess.run(train_op, feed_dict={x: xb, y: yb})
      before = sess.run(weights)
      sess.run(loss, feed_dict={x: xb, y: yb})
      np.testing.assert_array_equal(sess.run(weights), before)
      assert sess.run(global_step) == 1


def test_capture_graph_builds_in_a_function():
  graph, (global_step, x, y, *_, train_op) = tfmon.train.capture_graph(_tf1_model)
  xb, yb = _batch()
  with graph.as_default():
    with tfmon.train.MonitoredSession() as sess:
      sess.run(train_op, feed_dict={x: xb, y: yb})
  assert int(global_step.numpy()) == 1


def test_bad_fetches_and_feeds_name_the_value_and_the_fix():
  with tfmon.Graph().as_default():
    _, x, y, _, loss, _, _ = _tf1_model()
    with tfmon.train.MonitoredSession() as sess:
      with pytest.raises(ValueError, match=r"Fetch name 'los:0' names nothing.*"
                         r"Nearest names: \['loss'"):
        sess.run('los:0', feed_dict={x: np.zeros([1, 4]), y: [0]})
      with pytest.raises(ValueError, match=r'Cannot feed value of shape \(2, 5\) '
                         r"for Tensor 'x:0', which has shape \(None, 4\)"):
        sess.run(loss, feed_dict={x: np.zeros([2, 5]), y: [0, 1]})
  with tf.Graph().as_default():
    other = tf.constant(1.0)
  with tfmon.Graph().as_default():
    _tf1_model()
    with tfmon.train.MonitoredSession() as sess:
      with pytest.raises(ValueError, match='another graph'):
        sess.run(other)


def test_what_a_captured_graph_cannot_run_is_refused_at_creation_with_the_fix():
  with tfmon.Graph().as_default():
    _tf1_model()
    with pytest.raises(ValueError, match=r'strategy=.* with a captured TF1 graph'):
      tfmon.train.MonitoredSession(strategy=tf.distribute.OneDeviceStrategy('/cpu:0'))


def test_tf1_v1_layers_and_rnn_cells_build_with_tf_keras_installed():
  pytest.importorskip('tf_keras')
  with tfmon.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    logits = tf.compat.v1.layers.dense(x, 3, name='logits')
    assert 'logits/kernel:0' in {v.name for v in tf.compat.v1.trainable_variables()}
    with tfmon.train.MonitoredSession() as sess:
      assert sess.run(logits, feed_dict={x: np.ones([2, 4])}).shape == (2, 3)
  with tfmon.Graph().as_default():  # v1 RNN cells come from tf_keras too
    cell = tf.compat.v1.nn.rnn_cell.MultiRNNCell([
        tf.compat.v1.nn.rnn_cell.LSTMCell(3), tf.compat.v1.nn.rnn_cell.GRUCell(3)])
    outputs, _ = tf.compat.v1.nn.dynamic_rnn(
        cell, tf.compat.v1.placeholder_with_default(tf.ones([2, 5, 4]), [2, 5, 4]),
        dtype=tf.float32)
    assert {v.op.name for v in tf.compat.v1.trainable_variables()} == {
        'rnn/multi_rnn_cell/cell_0/lstm_cell/kernel',
        'rnn/multi_rnn_cell/cell_0/lstm_cell/bias',
        'rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel',
        'rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias',
        'rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel',
        'rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias'}  # TF1's names
    with tfmon.train.MonitoredSession() as sess:
      assert sess.run(outputs).shape == (2, 5, 3)



_V1_LAYERS_BY_ALIAS = '''
import json
import numpy as np
import tensorflow as tf
from tensorflow.compat.v1 import layers  # aliases of TF's lazy loaders,
rnn_cell = tf.compat.v1.nn.rnn_cell       # taken before tfmon is used
import tf_keras  # pylint: disable=unused-import  (TF makes its loaders anew)
import tfmon


def build():
  x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name='x')
  ones = tf.compat.v1.ones_initializer()
  y = layers.conv2d(x, 2, 3, name='conv', kernel_initializer=ones)
  cell = rnn_cell.GRUCell(2, kernel_initializer=ones)
  outputs, _ = tf.compat.v1.nn.dynamic_rnn(cell, tf.reshape(y, [-1, 4, 2]),
                                           dtype=tf.float32)
  return x, outputs


batch = np.arange(32, dtype=np.float32).reshape(2, 4, 4, 1) / 32
for graph, train in ((tfmon.Graph, tfmon.train), (tf.Graph, tf.compat.v1.train)):
  with graph().as_default():
    x, outputs = build()
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    with train.MonitoredSession() as sess:
      print(json.dumps([names, sess.run(outputs, feed_dict={x: batch}).tolist()]))
'''


@pytest.mark.slow
def test_v1_layers_aliased_before_tfmon_is_used_build_with_tf_keras():
  pytest.importorskip('tf_keras')
  # Aliases live from the script's start: in a process of its own.
  env = {k: v for k, v in os.environ.items() if k != 'TF_USE_LEGACY_KERAS'}
  printed = subprocess.run(
      [sys.executable, '-c', _V1_LAYERS_BY_ALIAS], capture_output=True, text=True,
      timeout=120, env=env)
  assert printed.returncode == 0, printed.stderr[-2000:]
  (ours_names, ours), (tf1_names, tf1) = map(json.loads, printed.stdout.splitlines())
  assert ours_names == tf1_names == [
      'conv/bias', 'conv/kernel', 'rnn/gru_cell/candidate/bias',
      'rnn/gru_cell/candidate/kernel', 'rnn/gru_cell/gates/bias',
      'rnn/gru_cell/gates/kernel']
  assert np.shape(ours) == (2, 4, 2)
  np.testing.assert_allclose(ours, tf1, rtol=1e-5)


def test_tfs_own_hooks_run_as_in_tf1_with_a_tf1_saver(tmp_path):
  with tfmon.Graph().as_default():
    global_step, x, y, weights, loss, _, train_op = _tf1_model()
    xb, yb = _batch()
    final_ops = tf.compat.v1.train.FinalOpsHook([loss, weights], {x: xb, y: yb})
    hooks = [
        tf.compat.v1.train.StopAtStepHook(last_step=4),
        tf.compat.v1.train.CheckpointSaverHook(
            str(tmp_path), save_steps=2, saver=tf.compat.v1.train.Saver()),
        tf.compat.v1.train.SummarySaverHook(
            save_steps=2, output_dir=str(tmp_path),
            summary_op=tf.compat.v1.summary.merge_all()),
        tf.compat.v1.train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path)),
        tf.compat.v1.train.FeedFnHook(lambda: {x: xb, y: yb}),
        final_ops,
    ]
    with tfmon.train.MonitoredSession(hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(train_op)
  assert int(global_step.numpy()) == 4
  # TF1's Saver wrote TF1's files, which TF1 graph mode restores.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-4')
  assert os.path.exists(tmp_path / 'model.ckpt-4.meta')
  with tf.Graph().as_default():
    _, _, _, tf1_weights, *_ = _tf1_model()
    with tf.compat.v1.Session() as session:
      tf.compat.v1.train.Saver().restore(session, str(tmp_path / 'model.ckpt-4'))
      np.testing.assert_allclose(session.run(tf1_weights),
                                 final_ops.final_ops_values[1], rtol=1e-6)
  accumulator = event_accumulator.EventAccumulator(str(tmp_path))
  accumulator.Reload()
  assert 'loss_summary' in accumulator.Tags()['scalars']
  assert 'global_step/sec' in accumulator.Tags()['scalars']  # its TF1 tag


def test_tf1_saver_restores_a_tfmon_checkpoint_by_name(tmp_path):
  with tfmon.Graph().as_default():
    _, x, y, weights, _, _, train_op = _tf1_model()
    xb, yb = _batch()
    final = tfmon.train.FinalOpsHook(weights)
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_summaries_steps=None,
        log_step_count_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=3), final]) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict={x: xb, y: yb})
  trained = final.final_ops_values
  with tf.Graph().as_default():
    global_step, _, _, tf1_weights, *_ = _tf1_model()
    with tf.compat.v1.Session() as session:
      tf.compat.v1.train.Saver().restore(session, str(tmp_path / 'model.ckpt-3'))
      np.testing.assert_array_equal(session.run(tf1_weights), trained)
      assert session.run(global_step) == 3


@pytest.mark.parametrize('hook_module', ['tfmon', 'tf'])
def test_training_runs_share_one_function_and_summaries_compute_on_recording_runs_only(
    tmp_path, hook_module):
  computed = []

  def count_summary_computation(loss):
    computed.append(loss)
    return np.float32(len(computed))

  train = tfmon.train if hook_module == 'tfmon' else tf.compat.v1.train
  with tfmon.Graph().as_default():
    global_step, x, y, _, loss, _, train_op = _tf1_model()
    tf.compat.v1.summary.scalar('computations', tf.compat.v1.py_func(
        count_summary_computation, [loss], tf.float32))
    xb, yb = _batch()
    # The issue-14 scenario, TF1-style: MonitoredTrainingSession's defaults
    # (summaries, step counter, checkpoints) with logging, NaN and stop hooks.
    hooks = [train.StopAtStepHook(last_step=10),
             train.LoggingTensorHook({'loss': loss, 'step': global_step}, every_n_iter=4),
             train.NanTensorHook(loss),
             train.CheckpointSaverHook(str(tmp_path), save_steps=4)]
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), hooks=hooks, save_summaries_steps=5,
        save_checkpoint_steps=None, log_step_count_steps=3) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict={x: xb, y: yb})
        raw = sess._tf_sess()  # pylint: disable=protected-access
      functions = raw.compiled_functions
  assert len(computed) == 2  # steps 1 and 6: the first run records, then every 5
  records = event_accumulator.EventAccumulator(str(tmp_path))
  records.Reload()
  assert [e.step for e in records.Scalars('computations')] == [1, 6]  # as TF1's
  assert [e.value for e in records.Scalars('computations')] == [1.0, 2.0]
  # TF's CheckpointSaverHook, given no saver, finds the default one TF1's
  # Scaffold made; tfmon's saves through its own.
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths][-3:] == [
      'model.ckpt-4', 'model.ckpt-8', 'model.ckpt-10']
  # One function for the training runs, recording or not, whichever hooks are
  # due. TF's own hooks add two small ones: their one-off read of the global
  # step at creation, and the save op of their v1 Saver.
  assert functions == (1 if hook_module == 'tfmon' else 3)


def test_a_one_shot_iterator_continues_across_runs_with_other_fetches():
  with tfmon.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    iterator = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(10))
    element = iterator.get_next()
    increment = tf.compat.v1.assign_add(global_step, 1)
    initializable = tf.compat.v1.data.make_initializable_iterator(
        tf.data.Dataset.range(100, 103))
    other = initializable.get_next()
    seen = []
    with tfmon.train.MonitoredSession() as sess:
      seen.append(sess.run([element, increment])[0])
      seen.append(sess.run(element))
      seen.append(sess.run({'e': element, 'g': global_step})['e'])
      sess.run(initializable.initializer)
      assert [sess.run(other), sess.run([other])[0]] == [100, 101]
      while not sess.should_stop():
        seen.append(sess.run(element))
  assert seen == list(range(10))  # and the data running out ended the loop



def _shuffled_batches(graph, train, seed):
  """Every batch of one-shot iterators over shuffled and cached datasets, as
  the docs recommend them, until the data runs out."""
  with graph().as_default():
    tf.compat.v1.set_random_seed(seed)
    noise = tf.data.Dataset.range(10).map(
        lambda i: i + tf.random.uniform([], 0, 100, tf.int64))
    datasets = [tf.data.Dataset.range(10).shuffle(10),  # reshuffled each epoch
                tf.data.Dataset.range(10).shuffle(10, reshuffle_each_iteration=False),
                noise.cache().shuffle(4, seed=7)]  # the same values each epoch
    batches = [tf.compat.v1.data.make_one_shot_iterator(d.batch(5).repeat(2)).get_next()
               for d in datasets]
    with train.MonitoredSession() as sess:
      fetched = []
      while not sess.should_stop():
        fetched.append([b.tolist() for b in sess.run(batches)])
  return fetched


def test_one_shot_iterators_of_shuffled_and_cached_datasets_give_tf1s_batches():
  expected = _shuffled_batches(tf.Graph, tf.compat.v1.train, seed=3)
  assert len(expected) == 4
  assert sorted(expected[0][0] + expected[1][0]) == list(range(10))
  assert expected[:2] != expected[2:]  # the first reshuffles each epoch
  assert [b[1] for b in expected[:2]] == [b[1] for b in expected[2:]]
  assert _shuffled_batches(tfmon.Graph, tfmon.train, seed=3) == expected
  unseeded = _shuffled_batches(tfmon.Graph, tfmon.train, seed=None)
  assert sorted(unseeded[0][0] + unseeded[1][0]) == list(range(10))


def test_step_functions_and_the_captured_graph_mix_in_one_session():
  with tfmon.Graph().as_default():
    global_step, x, y, _, loss, _, train_op = _tf1_model()
    counter = tf.Variable(0, dtype=tf.int64)  # an eager program's state
    xb, yb = _batch()

    def count(step):
      counter.assign_add(step)
      return {'counted': counter.read_value()}

    class ReadsTheCounter(tfmon.train.SessionRunHook):  # a TF2 hook's step function
      def before_run(self, run_context):
        return tfmon.train.SessionRunArgs(lambda: {'seen': counter.read_value()})

      def after_run(self, run_context, run_values):
        self.seen = run_values.results['seen']

    reader = ReadsTheCounter()
    with tfmon.train.MonitoredSession(hooks=[reader]) as sess:
      sess.run(train_op, feed_dict={x: xb, y: yb})
      assert reader.seen == 0 and sess.run(global_step) == 1
      assert sess.run(count, feed_dict={'step': np.int64(5)})['counted'] == 5
      # Both in one run: the graph's part, then the step functions'.
      counted, loss_value = sess.run([count, loss], feed_dict={
          'step': np.int64(1), x: xb, 'y:0': yb})
      assert counted['counted'] == 6 and reader.seen == 6 and loss_value > 0
      assert sess.run(global_step) == 1  # the loss alone trains nothing


def _batch_normalized_model(training):
  global_step = tf.compat.v1.train.get_or_create_global_step()
  x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
  if training == 'tensor':  # as TF1 scripts fed an is_training flag
    training = tf.compat.v1.placeholder_with_default(True, [], name='is_training')
  normalized = tf.compat.v1.layers.batch_normalization(
      tf.compat.v1.layers.dense(
          x, 8, kernel_initializer=tf.compat.v1.constant_initializer(0.5)),
      training=training)
  loss = tf.reduce_mean(tf.square(normalized))
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
  with tf.control_dependencies(update_ops):
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
        loss, global_step=global_step)
  moving_mean = next(v for v in tf.compat.v1.global_variables()
                     if 'moving_mean' in v.name)
  return x, training, update_ops, train_op, moving_mean


@pytest.mark.parametrize('training', [True, 'tensor'])
def test_v1_batch_norm_updates_run_through_update_ops_as_in_tf1(training):
  pytest.importorskip('tf_keras')
  batch = np.random.default_rng(0).normal(size=(4, 4))
  with tfmon.Graph().as_default():  # first: it points v1 layers at tf_keras
    x, flag, update_ops, train_op, moving_mean = _batch_normalized_model(training)
    assert len(update_ops) == 2  # the moving mean's and variance's, as in TF1
    with tfmon.train.MonitoredSession() as sess:
      sess.run(train_op, feed_dict={x: batch})
      got = sess.run(moving_mean)
      if training == 'tensor':  # not training: the statistics stay
        sess.run(train_op, feed_dict={x: batch, flag: False})
        np.testing.assert_array_equal(sess.run(moving_mean), got)
  with tf.Graph().as_default():
    x, _, _, train_op, moving_mean = _batch_normalized_model(training)
    with tf.compat.v1.train.MonitoredSession() as sess:
      sess.run(train_op, feed_dict={x: batch})
      expected = sess.run(moving_mean)
  assert np.all(expected != 0)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_local_variables_initializer_resets_v1_metrics():
  with tfmon.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [], name='x')
    mean, update = tf.compat.v1.metrics.mean(x)
    reset = tf.compat.v1.local_variables_initializer()
    with tfmon.train.MonitoredSession() as sess:
      for value in (1.0, 3.0):
        sess.run(update, feed_dict={x: value})
      assert sess.run(mean) == 2.0
      sess.run(reset)
      sess.run(update, feed_dict={x: 5.0})
      assert sess.run(mean) == 5.0


class _EveryOtherLogger(tf.compat.v1.train.LoggingTensorHook):
  """A subclass of TF's hook, as public code writes them: it overrides a
  method and reads the base class's private state."""

  def __init__(self, tensors):
    super().__init__(tensors, every_n_iter=2)
    self.logged_at = []

  def after_run(self, run_context, run_values):
    if self._should_trigger:
      self.logged_at.append(self._iter_count)
    super().after_run(run_context, run_values)


def test_subclasses_of_tfs_hooks_run_as_in_tf1():
  with tfmon.Graph().as_default():
    _, x, y, _, loss, _, train_op = _tf1_model()
    logger = _EveryOtherLogger({'loss': loss})
    xb, yb = _batch()
    with tfmon.train.MonitoredSession(
        hooks=[logger, tf.compat.v1.train.StopAtStepHook(num_steps=5)]) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict={x: xb, y: yb})
  assert logger.logged_at == [0, 2, 4]


def test_a_scaffold_saver_built_in_the_graph_is_honoured(tmp_path):
  with tfmon.Graph().as_default():
    global_step, x, y, weights, _, _, train_op = _tf1_model()
    saver = tf.compat.v1.train.Saver([weights, global_step])  # not the slots
    xb, yb = _batch()
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), scaffold=tfmon.train.Scaffold(saver=saver),
        save_summaries_steps=None, log_step_count_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=2)]) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict={x: xb, y: yb})
  names = {k for k, _ in tf.train.list_variables(str(tmp_path / 'model.ckpt-2'))}
  assert {'dense/kernel', 'global_step'} <= names
  assert not any('Momentum' in name for name in names)


def test_steps_per_loop_fuses_a_captured_train_op(caplog):
  caplog.set_level(logging.INFO)
  with tfmon.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    element = tf.compat.v1.data.make_one_shot_iterator(
        tf.data.Dataset.range(1000)).get_next()
    total = tf.compat.v1.get_variable('total', [], tf.int64,
                                      initializer=tf.compat.v1.zeros_initializer())
    with tf.control_dependencies([tf.compat.v1.assign_add(total, element)]):
      train_op = tf.compat.v1.assign_add(global_step, 1).op
    final = tfmon.train.FinalOpsHook(total)
    hooks = [tfmon.train.StopAtStepHook(last_step=25), final,
             tfmon.train.LoggingTensorHook({'element': element}, every_n_iter=10)]
    runs = 0
    with tfmon.train.MonitoredSession(hooks=hooks, steps_per_loop=10) as sess:
      while not sess.should_stop():
        sess.run(train_op)
        runs += 1
  assert final.final_ops_values == sum(range(25))  # each step read the next element once
  assert int(global_step.numpy()) == 25
  assert runs <= 5  # 25 steps, the logger due at 0, 10 and 20
  logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith('element = ')]
  assert [line.split(' (')[0] for line in logged] == ['element = 0', 'element = 10',
                                                     'element = 20']


def test_singular_session_raw_session_and_run_step_fn_on_a_captured_graph():
  with tfmon.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.placeholder(tf.float32, [], name='x')
    doubled = x * 2
    increment = tf.compat.v1.assign_add(global_step, 1)
    seen = []
    with tfmon.train.SingularMonitoredSession(
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=3)]) as sess:
      assert sess.raw_session().run(doubled, {x: 3.0}) == 6.0
      while not sess.should_stop():
        seen.append(sess.run_step_fn(
            lambda step_context: step_context.run_with_hooks(increment)))
  assert seen == [1, 2, 3]


def test_graphs_made_one_after_another_keep_their_iterators_apart():
  # An iterator's shared name must not meet a previous graph's, whose resource
  # lives on in TensorFlow's resource manager (ids of freed graphs are reused).
  for components in (1, 2, 1, 2):
    with tfmon.Graph().as_default():
      dataset = tf.data.Dataset.range(3)
      if components == 2:
        dataset = dataset.map(lambda x: (x, x))
      iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
      element = iterator.get_next()
      with tfmon.train.MonitoredSession() as sess:
        sess.run(iterator.initializer)
        assert np.size(sess.run(element)) == components
    del dataset, iterator, element, sess
    gc.collect()  # frees the graph: its id may be the next one's


def _averaged_losses_model():
  """TF1 code averaging loss *tensors* (TF's CIFAR-10 tutorial does) and making
  a variable from a graph tensor."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
  start = tf.constant([[1.0], [-1.0]]) * 0.5
  weights = tf.compat.v1.get_variable('w', initializer=start)
  doubled = tf.compat.v1.Variable(start * 2, name='doubled')
  loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - 1.0), name='loss')
  averages = tf.compat.v1.train.ExponentialMovingAverage(0.5, name='avg')
  average_op = averages.apply([loss])
  with tf.control_dependencies([average_op]):
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=global_step)
  return x, train_op, averages.average(loss), doubled


def test_moving_averages_of_tensors_and_tensor_initial_values_as_in_tf1(tmp_path):
  batch = np.array([[1.0, 2.0], [3.0, -1.0]])
  with tf.Graph().as_default():
    x, train_op, average, doubled = _averaged_losses_model()
    with tf.compat.v1.train.MonitoredTrainingSession() as sess:
      for _ in range(3):
        sess.run(train_op, feed_dict={x: batch})
      expected = sess.run([average, doubled])
  with tfmon.Graph().as_default():
    x, train_op, average, doubled = _averaged_losses_model()
    assert average.name == 'loss/avg:0'  # TF1's slot name, so its checkpoints match
    # TF1's idiom for a variable made from another's value (TF 2.21's own
    # graph mode raises NotImplementedError for it).
    tripled = tf.compat.v1.Variable(
        tf.compat.v1.trainable_variables()[0].initialized_value() * 3)
    with tf.init_scope():
      np.testing.assert_allclose(tripled.numpy(), [[1.5], [-1.5]])
    with tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
      for _ in range(3):
        sess.run(train_op, feed_dict={x: batch})
      got = sess.run([average, doubled])
  np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
  np.testing.assert_array_equal(got[1], [[1.0], [-1.0]])
  np.testing.assert_array_equal(expected[1], [[1.0], [-1.0]])
  assert 'loss/avg' in dict(  # saved, under its TF1 name
      tf.train.list_variables(str(tmp_path)))


def test_a_variable_initialized_from_a_placeholder_is_refused_with_the_fix():
  with tfmon.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [2], name='x')
    with pytest.raises(ValueError, match=r"initial value of variable 'v'.*x.*not from "
                       r'placeholders'):
      tf.compat.v1.get_variable('v', initializer=x * 2)


class _RecordingListener(tf.compat.v1.train.CheckpointSaverListener):

  def __init__(self):
    self.calls = []

  def begin(self):
    self.calls.append('begin')

  def before_save(self, session, global_step_value):
    self.calls.append(('before_save', int(global_step_value)))

  def after_save(self, session, global_step_value):
    self.calls.append(('after_save', int(global_step_value)))

  def end(self, session, global_step_value):
    self.calls.append(('end', int(global_step_value)))


class _GlobalStepReader(tf.compat.v1.train.SessionRunHook):
  """Fetches the global step as TF's own hooks do, with every run."""

  def begin(self):
    from tensorflow.python.training import training_util  # pylint: disable=g-import-not-at-top
    self._read = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
    self.seen = []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._read)

  def after_run(self, run_context, run_values):
    self.seen.append(int(run_values.results))


def test_tfs_profiler_and_checkpoint_listeners_run_natively_on_the_step_before_the_run(
    tmp_path):
  listener = _RecordingListener()
  reader = _GlobalStepReader()
  with tfmon.Graph().as_default():
    _, x, y, _, _, _, train_op = _tf1_model()
    xb, yb = _batch()
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=9), reader,
             tf.compat.v1.train.CheckpointSaverHook(
                 str(tmp_path / 'tf1'), save_steps=4, listeners=[listener]),
             tf.compat.v1.train.ProfilerHook(save_steps=4, output_dir=str(tmp_path))]
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path / 'run'), hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(train_op, feed_dict={x: xb, y: yb})
  # TF's hooks read `global_step/add` with the run that increments the step:
  # TF1's executor read it first in practice (but not always); here always.
  assert reader.seen == list(range(9))
  assert listener.calls == ['begin', ('before_save', 0), ('after_save', 0),
                            ('before_save', 4), ('after_save', 4),
                            ('before_save', 8), ('after_save', 8),
                            ('before_save', 9), ('after_save', 9), ('end', 9)]
  assert tf.train.latest_checkpoint(str(tmp_path / 'tf1')).endswith('model.ckpt-9')
  # TF's ProfilerHook on TF1's schedule; TF 2 fills no step_stats, so its
  # timelines hold no ops (docs/known-differences.md).
  assert sorted(f for f in os.listdir(tmp_path) if f.startswith('timeline')) == [
      'timeline-4.json', 'timeline-8.json']
  profiles = os.listdir(tmp_path / 'run' / 'plugins' / 'profile')  # TF2's, instead
  assert sorted(int(p.rsplit('_step_', 1)[1]) for p in profiles) == [4, 8]


def test_tfs_global_step_waiter_waits_for_another_thread_to_move_the_step():
  with tfmon.Graph().as_default():
    global_step, x, y, _, _, _, train_op = _tf1_model()
    xb, yb = _batch()
    waiter = tf.compat.v1.train.GlobalStepWaiterHook(wait_until_step=5)
    with tfmon.train.MonitoredSession(hooks=[waiter]) as sess:
      mover = threading.Timer(0.2, lambda: global_step.assign(5))
      mover.start()
      started = time.monotonic()
      sess.run(train_op, feed_dict={x: xb, y: yb})
      mover.join()
      assert time.monotonic() - started >= 0.2  # it waited for the step
      assert sess.run(global_step) == 6


def test_init_from_checkpoint_initializes_a_fresh_session_as_tf1s_init_op_did(tmp_path):
  with tf.Graph().as_default():  # a pre-trained model, saved by TF1
    tf.compat.v1.get_variable('bert/kernel', initializer=tf.constant([[1.0, 2.0]]))
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(session, str(tmp_path / 'pretrained.ckpt'))

  def build():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    kernel = tf.compat.v1.get_variable('model/kernel', [1, 2])
    tf.compat.v1.train.init_from_checkpoint(str(tmp_path / 'pretrained.ckpt'),
                                            {'bert/': 'model/'})  # BERT's model_fn does
    return kernel, tf.group(tf.compat.v1.assign_add(kernel, [[1.0, 1.0]]),
                            tf.compat.v1.assign_add(global_step, 1))

  for expected in ([[1.0, 2.0]], [[2.0, 3.0]]):  # fresh, then resumed from its own
    with tfmon.Graph().as_default():
      kernel, bump = build()
      with tfmon.train.MonitoredTrainingSession(
          checkpoint_dir=str(tmp_path / 'run'), save_checkpoint_steps=100) as sess:
        np.testing.assert_array_equal(sess.run(kernel), expected)
        sess.run(bump)


def test_lookup_tables_are_initialized_as_tf1s_default_local_init_op_did():
  with tfmon.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    words = tf.compat.v1.placeholder(tf.string, [None], name='words')
    table = tf.compat.v1.lookup.StaticHashTable(
        tf.compat.v1.lookup.KeyValueTensorInitializer(['a', 'b'], [0, 1], tf.string,
                                                      tf.int64), -1)
    ids = table.lookup(words)
    with tfmon.train.MonitoredSession() as sess:
      np.testing.assert_array_equal(sess.run(ids, {words: ['b', 'z', 'a']}), [1, -1, 0])


def test_summaries_of_fed_placeholders_and_constants_record_with_an_op_fetch():
  with tfmon.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
    tf.compat.v1.summary.scalar('constant', tf.constant(3.0))
    tf.compat.v1.summary.histogram('batch', x)
    increment = tf.compat.v1.assign_add(global_step, 1).op
    merged = tf.compat.v1.summary.merge_all()
    with tfmon.train.MonitoredSession() as sess:
      _, recorded = sess.run([increment, merged], {x: np.ones((2, 2))})
      summary = tf.compat.v1.Summary.FromString(recorded)
      assert [v.tag for v in summary.value] == ['constant', 'batch']
      assert summary.value[0].simple_value == 3.0
      assert sess.run(increment, {x: np.ones((2, 2))}) is None
      assert sess.run(global_step) == 2


def test_what_a_summary_reads_runs_once_on_recording_steps(tmp_path):
  # A summary of a tensor that an assignment and an initializable iterator
  # feed. The gated summaries' function, pruned from that tensor, also holds a
  # dead copy of what computes it (an assignment, a second, uninitialized
  # iterator): TF drops it when it instantiates the function. The counter
  # moves once a step and the data is read once, as in TF1.
  def run(graph, train):
    with graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      iterator = tf.compat.v1.data.make_initializable_iterator(
          tf.data.Dataset.range(100).map(lambda x: tf.cast(x, tf.float32)))
      counter = tf.compat.v1.get_variable(
          'counter', [], initializer=tf.compat.v1.zeros_initializer())
      with tf.control_dependencies([tf.compat.v1.assign_add(counter, 1.0)]):
        doubled = tf.identity(iterator.get_next() * 2.0)
      tf.compat.v1.summary.scalar('doubled', doubled)
      with tf.control_dependencies([tf.compat.v1.assign_add(global_step, 1)]):
        train_op = tf.identity(doubled)
      scaffold = train.Scaffold(local_init_op=tf.group(
          iterator.initializer, tf.compat.v1.local_variables_initializer()))
      seen = []
      directory = str(tmp_path / graph.__module__.split('.')[0])
      with train.MonitoredTrainingSession(
          checkpoint_dir=directory, scaffold=scaffold, save_summaries_steps=1,
          save_checkpoint_secs=None, hooks=[train.StopAtStepHook(last_step=4)]) as sess:
        while not sess.should_stop():
          seen.append(tuple(float(v) for v in sess.run([train_op, counter])))
    records = event_accumulator.EventAccumulator(directory)
    records.Reload()
    return seen, [(e.step, e.value) for e in records.Scalars('doubled')]

  ours = run(tfmon.Graph, tfmon.train)
  tf1 = run(tf.Graph, tf.compat.v1.train)
  # The counter fetched with train_op is its value before the run (TF1 read it
  # before or after the run's assignment, as its executor happened to).
  assert ours[0] == [(0.0, 0.0), (2.0, 1.0), (4.0, 2.0), (6.0, 3.0)]
  assert [doubled for doubled, _ in ours[0]] == [doubled for doubled, _ in tf1[0]]
  assert ours[1] == tf1[1] == [(1, 0.0), (2, 2.0), (3, 4.0), (4, 6.0)]



def _summaries_of_the_input(graph, train, directory, summarized, tf_hook):
  """A TF1 job summarizing `summarized` of 'images', 'labels' and 'loss', two
  of them the outputs of one IteratorGetNext, with `merge_all()` written by
  TF's own SummarySaverHook (`tf_hook`) or MonitoredTrainingSession's."""
  with graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    images = np.linspace(0, 1, 8 * 4 * 4 * 3, dtype=np.float32).reshape(8, 4, 4, 3)
    dataset = tf.data.Dataset.from_tensor_slices((images, np.arange(8) % 3))
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset.batch(2).repeat()).get_next()
    weights = tf.compat.v1.get_variable('w', [48, 3],
                                        initializer=tf.compat.v1.zeros_initializer())
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(
        labels, tf.matmul(tf.reshape(features, [-1, 48]), weights))
    if 'images' in summarized:
      tf.compat.v1.summary.image('images', features, max_outputs=1)
      tf.compat.v1.summary.histogram('pixels', features)
    if 'labels' in summarized:  # computed from the input alone
      tf.compat.v1.summary.scalar('label_mean', tf.reduce_mean(tf.cast(labels, tf.float32)))
    if 'loss' in summarized:
      tf.compat.v1.summary.scalar('loss', loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=global_step)
    hooks = [train.StopAtStepHook(last_step=5)]
    if tf_hook:
      hooks.append(tf.compat.v1.train.SummarySaverHook(
          save_steps=2, output_dir=directory, summary_op=tf.compat.v1.summary.merge_all()))
    with train.MonitoredTrainingSession(
        checkpoint_dir=directory, hooks=hooks, save_checkpoint_secs=None,
        save_summaries_steps=None if tf_hook else 2, log_step_count_steps=None) as sess:
      losses = []
      while not sess.should_stop():
        losses.append(sess.run([train_op, loss])[1])
  records = event_accumulator.EventAccumulator(
      directory, size_guidance={event_accumulator.HISTOGRAMS: 0})
  records.Reload()
  tags = records.Tags()
  return (losses, {tag: ([e.step for e in records.Scalars(tag)],
                         [e.value for e in records.Scalars(tag)])
                   for tag in tags['scalars']},
          {tag: [e.step for e in records.Images(tag)] for tag in tags['images']},
          {tag: [e.step for e in records.Histograms(tag)] for tag in tags['histograms']})


@pytest.mark.parametrize('summarized,tf_hook', [
    (('images', 'loss'), True), (('images', 'loss'), False),
    (('labels', 'loss'), False), (('images', 'labels', 'loss'), True)])
def test_summaries_of_outputs_of_one_iterator_get_next_record_as_in_tf1(
    tmp_path, summarized, tf_hook):
  expected = _summaries_of_the_input(tf.Graph, tf.compat.v1.train, str(tmp_path / 'tf1'),
                                     summarized, tf_hook)
  ours = _summaries_of_the_input(tfmon.Graph, tfmon.train, str(tmp_path / 'tfmon'),
                                 summarized, tf_hook)
  np.testing.assert_allclose(ours[0], expected[0], rtol=1e-6)
  assert ours[1].keys() == expected[1].keys()
  for tag, (steps, values) in expected[1].items():
    assert ours[1][tag][0] == steps == [1, 3, 5]
    np.testing.assert_allclose(ours[1][tag][1], values, rtol=1e-6)
  assert ours[2:] == expected[2:]
  if 'images' in summarized:
    assert expected[2] == {'images/image': [1, 3, 5]} and expected[3] == {'pixels': [1, 3, 5]}



class _InitializesTheIterator(tf.compat.v1.train.SessionRunHook):
  """Runs an initializable iterator's initializer as the session starts, as
  TF1 programs' input hooks did."""

  def __init__(self, iterator):
    self._iterator = iterator

  def after_create_session(self, session, coord):
    session.run(self._iterator.initializer)


def _metric_summary_job(graph, train, directory, initializable):
  """A summary of a v1 metric's update op, recorded every third step: the
  metric's value fetched with every step, and the summary's values."""
  with graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    rng = np.random.default_rng(0)
    dataset = tf.data.Dataset.from_tensor_slices((
        rng.normal(size=(16, 2)).astype(np.float32), rng.integers(0, 2, 16)))
    dataset = dataset.batch(2).repeat()
    if initializable:
      iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
    else:
      iterator = tf.compat.v1.data.make_one_shot_iterator(dataset)
    features, labels = iterator.get_next()
    weights = tf.compat.v1.get_variable(
        'w', [2, 2], initializer=tf.compat.v1.constant_initializer([[1, -1], [0.5, 2]]))
    logits = tf.matmul(features, weights)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    accuracy, update = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))
    tf.compat.v1.summary.scalar('accuracy', update)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=global_step)
    hooks = [train.StopAtStepHook(last_step=7)]
    if initializable:
      hooks.append(_InitializesTheIterator(iterator))
    with train.MonitoredTrainingSession(
        checkpoint_dir=directory, hooks=hooks, save_summaries_steps=3,
        save_checkpoint_secs=None, log_step_count_steps=None) as sess:
      fetched = []
      while not sess.should_stop():
        fetched.append(float(sess.run([train_op, accuracy])[1]))
  records = event_accumulator.EventAccumulator(directory)
  records.Reload()
  return fetched, [(e.step, e.value) for e in records.Scalars('accuracy_1')]


@pytest.mark.parametrize('initializable', [True, False])
def test_a_summary_of_a_metrics_update_op_updates_it_on_recording_steps_only(
    tmp_path, initializable):
  expected = _metric_summary_job(tf.Graph, tf.compat.v1.train, str(tmp_path / 'tf1'),
                                 initializable)
  ours = _metric_summary_job(tfmon.Graph, tfmon.train, str(tmp_path / 'tfmon'),
                             initializable)
  # The update runs with the summary, on steps 1, 4 and 7: the metric counts
  # 3 batches, not 7. (TF1's SummarySaverHook decides from a global step read
  # racing the run's increment: on a loaded machine its third record came at 6.)
  assert [step for step, _ in ours[1]] == [1, 4, 7]
  assert [step for step, _ in expected[1]][:2] == [1, 4]
  np.testing.assert_allclose([v for _, v in ours[1]][:2], [v for _, v in expected[1]][:2])
  # Fetched with the update's run, TF1 read it before or after the update.
  between = [1, 2, 4]  # runs that record nothing
  assert [ours[0][i] for i in between] == [expected[0][i] for i in between]


def _conv_model():
  """A conv layer on images from a tf.data iterator, as the CIFAR-10 tutorial:
  TF1's gradients group conv's gradients with respect to the images and the
  filter in a `tuple`; `Session.run(train_op)` computes the filter's only."""
  images = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.from_tensors(
      np.ones((2, 8, 8, 3), np.float32)).repeat()).get_next()
  filters = tf.compat.v1.get_variable('filters', [3, 3, 3, 4])
  loss = tf.reduce_sum(tf.nn.relu(tf.nn.conv2d(images, filters, 1, 'SAME')))
  return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.compat.v1.train.get_or_create_global_step())


# What carries values and control between kernels, not a computation.
_PLUMBING = {'_Arg', '_Retval', 'Const', 'VarHandleOp', 'NoOp', 'Identity',
             'OneShotIterator'}


def test_a_run_of_train_op_alone_computes_what_tf1_computes():
  # Grappler prunes a function by its outputs; one that only runs operations
  # had none, and kept conv's gradient with respect to the images (BUILD_NOTES:
  # 1.18x TF1's step on the CIFAR-10 tutorial).
  with tf.Graph().as_default():
    train_op = _conv_model()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      metadata = tf.compat.v1.RunMetadata()
      sess.run(train_op, options=tf.compat.v1.RunOptions(output_partition_graphs=True),
               run_metadata=metadata)
  tf1_kernels = sorted(node.op for graph in metadata.partition_graphs
                       for node in graph.node if node.op not in _PLUMBING)
  assert any('Conv2DBackpropFilter' in op for op in tf1_kernels)
  assert not any('Conv2DBackpropInput' in op for op in tf1_kernels)

  with tfmon.Graph().as_default():
    train_op = _conv_model()
    with tfmon.train.MonitoredSession() as sess:
      kernels = kernels_run(lambda: sess.run(train_op))
  assert sorted(op for op in kernels if op not in _PLUMBING) == tf1_kernels


def _seeded_tf1_job(graph, train):
  """A seeded TF1 job touching what draws random numbers or keeps state: its
  losses, a random op's values, then a v1 metric and a moving average."""
  rng = np.random.default_rng(0)
  features = rng.normal(size=(64, 8)).astype(np.float32)
  labels = rng.integers(0, 3, 64)
  with graph().as_default():
    tf.compat.v1.set_random_seed(2029)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.placeholder(tf.float32, [None, 8])
    y = tf.compat.v1.placeholder(tf.int64, [None])
    with tf.compat.v1.variable_scope(
        'net', regularizer=lambda w: 1e-3 * tf.nn.l2_loss(w)):
      hidden = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable('w1', [8, 16])))
      hidden = tf.compat.v1.nn.dropout(hidden, keep_prob=0.8)
      output_weights = tf.compat.v1.get_variable(
          'w2', [16, 3], initializer=tf.compat.v1.truncated_normal_initializer())
      logits = tf.matmul(hidden, output_weights)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, logits) + tf.add_n(
        tf.compat.v1.losses.get_regularization_losses())
    learning_rate = tf.compat.v1.train.exponential_decay(0.05, global_step, 4, 0.9)
    minimize = tf.compat.v1.train.AdamOptimizer(learning_rate).minimize(
        loss, global_step=global_step)
    averages = tf.compat.v1.train.ExponentialMovingAverage(0.9, global_step)
    with tf.control_dependencies([minimize]):
      train_op = averages.apply(tf.compat.v1.trainable_variables())
    _, accuracy_update = tf.compat.v1.metrics.accuracy(y, tf.argmax(logits, 1))
    noise = tf.random.normal([2])
    seen = []
    with train.MonitoredTrainingSession(hooks=[train.StopAtStepHook(last_step=8)]) as sess:
      while not sess.should_stop():
        batch = slice(len(seen) * 8, len(seen) * 8 + 8)
        # Read in a run of its own: fetched with train_op, TF1 read the
        # average before or after the run's update, as its executor happened to.
        average = sess.run(averages.average(output_weights))
        seen.append(sess.run([train_op, loss, noise, accuracy_update],
                             {x: features[batch], y: labels[batch]})[1:] + [average])
    return seen


def test_a_seeded_tf1_job_computes_tf1s_numbers():
  # The same initial values, dropout masks, random op values, Adam, decayed
  # learning rate, regularization, moving averages and metric: the same
  # numbers, step by step.
  ours = _seeded_tf1_job(tfmon.Graph, tfmon.train)
  tf1 = _seeded_tf1_job(tf.Graph, tf.compat.v1.train)
  assert len(ours) == len(tf1) == 8
  for mine, theirs in zip(ours, tf1):
    for value, tf1_value in zip(mine, theirs):
      np.testing.assert_allclose(value, tf1_value, rtol=1e-6)


def test_a_session_has_tf1s_graph_property_for_file_writers(tmp_path):
  with tfmon.Graph().as_default() as graph:
    loss = tf.reduce_sum(tf.compat.v1.get_variable(
        'w', [2], initializer=tf.compat.v1.ones_initializer()))
    tf.compat.v1.summary.scalar('loss', loss)
    merged = tf.compat.v1.summary.merge_all()
    with tfmon.train.MonitoredTrainingSession() as sess:
      assert sess.graph is graph
      writer = tf.compat.v1.summary.FileWriter(str(tmp_path), sess.graph)
      writer.add_summary(sess.run(merged), 7)
      writer.close()
    assert sess.graph is None  # closed, as TF1's
  records = event_accumulator.EventAccumulator(str(tmp_path))
  records.Reload()
  assert records.Tags()['graph']
  assert [(e.step, e.value) for e in records.Scalars('loss')] == [(7, 2.0)]
  with tfmon.train.MonitoredSession() as sess:  # of step functions: no one graph
    assert sess.graph is None


def test_sparse_tensors_are_fed_and_fetched_as_in_tf1():
  def run(graph, train, bad_feed=None):
    with graph().as_default():
      labels = tf.compat.v1.sparse_placeholder(tf.float32, shape=[2, 3])
      total = tf.reduce_sum(tf.compat.v1.sparse.to_dense(labels) * [[1.0, 2.0, 3.0]])
      nonzero = tf.sparse.from_dense(tf.constant([[0.0, 2.0], [3.0, 0.0]]))
      given = tf.compat.v1.SparseTensorValue([[0, 1], [1, 2]], [1.0, 2.0], [2, 3])
      with train.MonitoredSession() as sess:
        if bad_feed is not None:
          return sess.run(total, {labels: bad_feed})
        return [sess.run(total, {labels: given}),
                sess.run(total, {labels: ([[1, 0]], [5.0], [2, 3])}),  # a tuple
                sess.run({'sparse': [nonzero]})['sparse'][0]]

  ours, tf1 = run(tfmon.Graph, tfmon.train), run(tf.Graph, tf.compat.v1.train)
  assert ours[:2] == tf1[:2] == [8.0, 5.0]
  assert isinstance(ours[2], tf.compat.v1.SparseTensorValue)
  for mine, theirs in zip(ours[2], tf1[2]):
    np.testing.assert_array_equal(mine, theirs)
  np.testing.assert_array_equal(ours[2].values, [2.0, 3.0])
  with pytest.raises(TypeError, match=r'Cannot feed 5 to the sparse tensor of .*: feed '
                     r'a tf.compat.v1.SparseTensorValue\(indices, values, dense_shape\)'):
    run(tfmon.Graph, tfmon.train, bad_feed=5)


class _TinyCell:
  """An RNN cell as TF1 code wrote its own: `dynamic_rnn` calls it in its
  while loop, where it makes its variable on the first call, under the
  device function dynamic_rnn sets as the caching device."""

  state_size = 2
  output_size = 2

  def zero_state(self, batch_size, dtype):
    return tf.zeros([batch_size, 2], dtype)

  def __call__(self, inputs, state, scope=None):
    with tf.compat.v1.variable_scope(scope or 'tiny_cell',
                                     reuse=tf.compat.v1.AUTO_REUSE):
      kernel = tf.compat.v1.get_variable(
          'kernel', [3, 2], initializer=tf.compat.v1.constant_initializer(0.1))
    output = tf.tanh(tf.matmul(tf.concat([inputs, state[:, :1]], 1), kernel))
    return output, output


def test_dynamic_rnn_makes_its_cells_variables_in_its_loop_as_in_tf1():
  def run(graph, train):
    with graph().as_default():
      sequence = tf.compat.v1.placeholder(tf.float32, [2, 4, 2])
      outputs, _ = tf.compat.v1.nn.dynamic_rnn(_TinyCell(), sequence, dtype=tf.float32)
      loss = tf.reduce_sum(tf.square(outputs - 1.0))
      train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
      names = sorted(v.op.name for v in tf.compat.v1.trainable_variables())
      feed = {sequence: np.ones((2, 4, 2))}
      with train.MonitoredSession() as sess:
        return names, [sess.run([train_op, loss], feed)[1] for _ in range(3)]

  names, losses = run(tfmon.Graph, tfmon.train)
  assert names == ['rnn/tiny_cell/kernel']
  tf1_names, tf1_losses = run(tf.Graph, tf.compat.v1.train)
  assert names == tf1_names
  np.testing.assert_allclose(losses, tf1_losses, rtol=1e-6)
  assert losses[2] < losses[0]  # it trains


def _partitioned_embedding_job(graph, train, checkpoint_dir, last_step):
  """A TF1 job on a partitioned embedding (and Adagrad's partitioned slots);
  returns its losses."""
  with graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    embeddings = tf.compat.v1.get_variable(
        'embeddings', [10, 4], partitioner=tf.compat.v1.fixed_size_partitioner(2),
        initializer=tf.compat.v1.constant_initializer(0.5))
    ids = tf.compat.v1.placeholder(tf.int64, [None])
    loss = tf.reduce_sum(tf.compat.v1.nn.embedding_lookup(embeddings, ids) ** 2)
    train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(
        loss, global_step=global_step)
    losses = []
    with train.MonitoredTrainingSession(
        checkpoint_dir=str(checkpoint_dir), save_summaries_steps=None,
        hooks=[train.StopAtStepHook(last_step=last_step)]) as sess:
      while not sess.should_stop():
        losses.append(sess.run([train_op, loss], {ids: [1, 7, 7]})[1])
  return losses


def test_a_tf1_checkpoint_of_partitioned_variables_continues_under_tfmon(tmp_path):
  # TF1 saved each partitioned variable as one tensor under its whole name.
  uninterrupted = _partitioned_embedding_job(
      tf.Graph, tf.compat.v1.train, tmp_path / 'once', 6)
  first = _partitioned_embedding_job(tf.Graph, tf.compat.v1.train, tmp_path / 'job', 3)
  assert {'embeddings', 'embeddings/Adagrad'} <= {
      name for name, _ in tf.train.list_variables(str(tmp_path / 'job'))}
  rest = _partitioned_embedding_job(tfmon.Graph, tfmon.train, tmp_path / 'job', 6)
  np.testing.assert_allclose(first + rest, uninterrupted, rtol=1e-6)


def test_a_tf1_saver_of_moving_averages_restores_a_tfmon_checkpoint_for_evaluation(
    tmp_path):
  # TF1's evaluation idiom: restore each variable from its moving average.
  with tfmon.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weights = tf.compat.v1.get_variable('w', [2], initializer=tf.compat.v1.ones_initializer())
    minimize = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        tf.reduce_sum(weights * weights), global_step=global_step)
    averages = tf.compat.v1.train.ExponentialMovingAverage(0.9, global_step)
    with tf.control_dependencies([minimize]):
      train_op = averages.apply([weights])
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_summaries_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=3)]) as sess:
      while not sess.should_stop():
        sess.run(train_op)
    average = averages.average(weights)
  averaged = average.numpy()
  assert not np.allclose(averaged, weights.numpy())

  def evaluation_graph():
    weights = tf.compat.v1.get_variable('w', [2])
    saver = tf.compat.v1.train.Saver(
        tf.compat.v1.train.ExponentialMovingAverage(0.9).variables_to_restore())
    return weights, saver

  with tfmon.Graph().as_default():
    weights, saver = evaluation_graph()
    with tfmon.train.MonitoredSession(session_creator=tfmon.train.ChiefSessionCreator(
        scaffold=tfmon.train.Scaffold(saver=saver), checkpoint_dir=str(tmp_path))) as sess:
      np.testing.assert_allclose(sess.run(weights), averaged)
  with tfmon.Graph().as_default():  # TF1's Saver.restore through the session too
    weights, saver = evaluation_graph()
    with tfmon.train.MonitoredSession() as sess:
      saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
      np.testing.assert_allclose(sess.run(weights), averaged)
  with tf.Graph().as_default():  # and TF1 in a plain session
    weights, saver = evaluation_graph()
    with tf.compat.v1.Session() as session:
      saver.restore(session, tf.train.latest_checkpoint(str(tmp_path)))
      np.testing.assert_allclose(session.run(weights), averaged)


_WITHOUT_V2_BEHAVIOR = '''
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()  # the TF1-to-TF2 migration guide's first line
import tfmon
for make in (tfmon.Graph, lambda: tfmon.train.MonitoredSession().run(lambda: 1)):
  try:
    make()
  except RuntimeError as e:
    print(e)
'''


@pytest.mark.slow
def test_tf1_scripts_that_turn_off_v2_behavior_are_told_to_keep_it():
  # Process-wide and for good: in a process of its own.
  printed = subprocess.run(
      [sys.executable, '-c', _WITHOUT_V2_BEHAVIOR], capture_output=True, text=True,
      timeout=120, check=True).stdout.splitlines()
  assert printed == [
      "tfmon runs on TensorFlow 2's eager runtime, which "
      'tf.compat.v1.disable_v2_behavior() or disable_eager_execution() turned off '
      'for this process. Remove that call: `with tfmon.Graph().as_default():` runs '
      'TF1 graph code as it is, and a tfmon session runs that graph. If the code '
      'reads TF1 shapes (`Dimension.value`, as in `x.shape[1].value`), call '
      'tf.compat.v1.disable_v2_tensorshape() in its place: it keeps the eager '
      'runtime on.'] * 2


def _tf1_shapes_job(graph, train):
  """TF1 code reading TF1 shapes: losses of three runs, and the message of a
  feed of the wrong shape."""
  with graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    assert isinstance(x.shape[1], tf.compat.v1.Dimension)
    weights = tf.compat.v1.get_variable(
        'w', [x.shape[1].value, 3], initializer=tf.compat.v1.ones_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, weights)))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=global_step)
    xb, _ = _batch()
    with train.MonitoredSession() as sess:
      losses = [sess.run([train_op, loss], feed_dict={x: xb})[1] for _ in range(3)]
      with pytest.raises(ValueError) as error:
        sess.run(loss, feed_dict={x: np.zeros([2, 5])})
  return losses, str(error.value)


def test_tf1_tensorshapes_keep_the_eager_runtime_and_run_under_tfmon():
  # What a TF1 script reading `Dimension.value` calls instead of
  # disable_v2_behavior(); process-wide, undone at the end.
  tf.compat.v1.disable_v2_tensorshape()
  try:
    assert tf.compat.v1.executing_eagerly_outside_functions()
    ours, message = _tf1_shapes_job(tfmon.Graph, tfmon.train)
    expected, tf1_message = _tf1_shapes_job(tf.Graph, tf.compat.v1.train)
    with tfmon.train.MonitoredSession() as sess:  # step functions' feeds too
      sums = [sess.run(lambda x: tf.reduce_sum(x), feed_dict={'x': np.ones([n, 3])})
              for n in (2, 5, 7)]  # a new shape relaxes the trace once
  finally:
    tf.compat.v1.enable_v2_tensorshape()
  np.testing.assert_allclose(ours, expected, rtol=1e-6)
  shapes = r'Cannot feed value of shape \(2, 5\) for Tensor .?x:0.?, which has shape \(\?, 4\)'
  assert re.match(shapes, tf1_message) and re.match(shapes, message), (message, tf1_message)
  assert sums == [6.0, 15.0, 21.0]


def test_tf1_reference_variables_become_resource_variables():
  # Eager variables are resource variables: TF refuses reference ones.
  def run(graph, train):
    with graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      weights = tf.compat.v1.get_variable(
          'w', [2], initializer=tf.compat.v1.ones_initializer(), use_resource=False)
      with tf.compat.v1.variable_scope('scope', use_resource=False):
        scale = tf.compat.v1.Variable([1.0, 2.0], name='scale')
      loss = tf.reduce_sum(weights * scale)
      train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
          loss, global_step=global_step)
      with train.MonitoredSession() as sess:
        return [sess.run([train_op, loss])[1] for _ in range(3)]

  tf.compat.v1.disable_resource_variables()  # as TF1 scripts did, process-wide
  try:
    ours = run(tfmon.Graph, tfmon.train)
  finally:
    tf.compat.v1.enable_resource_variables()
  np.testing.assert_allclose(ours, run(tf.Graph, tf.compat.v1.train), rtol=1e-6)


def _logged_by_names(graph, train, hook_class):
  """What a LoggingTensorHook given an op's name logs, and what `run` fetches
  for names, under `graph` and `train` (TF1's or tfmon's)."""
  logged = []
  with graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.placeholder(tf.float32, [None], name='x')
    tf.reduce_mean(tf.square(x), name='xent')
    tf.unique(x, name='uniq')  # two outputs
    train_op = tf.compat.v1.assign_add(global_step, 1)
    hook = hook_class(['xent', 'xent:0'], every_n_iter=1, formatter=logged.append)
    with train.MonitoredSession(hooks=[hook]) as sess:
      fetched = [sess.run([train_op, 'xent', 'xent:0', {'k': 'xent'}],
                          feed_dict={x: [1.0, float(step)]})[1:] for step in range(3)]
    errors = []
    for names in (['uniq'], ['nope']):
      with pytest.raises((ValueError, KeyError)) as error:
        train.MonitoredSession(hooks=[hook_class(names, every_n_iter=1)])
      errors.append((error.type, str(error.value)))
  return logged, fetched, errors


def test_logging_tensor_hook_takes_an_op_name_for_its_output_and_run_for_the_op_as_tf1():
  # TF1: LoggingTensorHook's begin() took 'xent' for 'xent:0', while
  # Session.run('xent') fetched the operation, whose value is None.
  expected = _logged_by_names(tf.Graph, tf.compat.v1.train,
                              tf.compat.v1.train.LoggingTensorHook)
  assert expected[0] == [{'xent': 0.5, 'xent:0': 0.5}, {'xent': 1.0, 'xent:0': 1.0},
                         {'xent': 2.5, 'xent:0': 2.5}]
  assert expected[1] == [[None, 0.5, {'k': None}], [None, 1.0, {'k': None}],
                         [None, 2.5, {'k': None}]]
  assert _logged_by_names(tfmon.Graph, tfmon.train, tfmon.train.LoggingTensorHook) == expected


def test_an_iterators_initializer_run_prunes_no_summaries(tmp_path):
  # Summaries seed a training run's function; an initializer runs an operation
  # too, but reads no data: pruned with the summaries, it held the whole
  # forward pass (the census example's 1,216 ops, 0.2 s a train).
  from tfmon.compiled import graph_call  # pylint: disable=import-outside-toplevel
  with tfmon.Graph().as_default():
    data = tf.data.Dataset.from_tensors(np.ones([2, 3], np.float32)).repeat()
    iterator = tf.compat.v1.data.make_initializable_iterator(data)
    loss = tf.reduce_sum(iterator.get_next() * tf.compat.v1.get_variable('w', [3]))
    tf.compat.v1.summary.scalar('loss', loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())


    class _InitializeIterator(tf.compat.v1.train.SessionRunHook):  # as Estimator's

      def after_create_session(self, session, coord):
        session.run(iterator.initializer)

    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), hooks=[_InitializeIterator()],
        save_summaries_steps=1) as sess:
      sess.run(train_op)
      functions = [family.function for call in graph_call._open_calls  # pylint: disable=protected-access
                   for family in call._families.values()]  # pylint: disable=protected-access
  gated = [f for f in functions if f.gated]
  assert len(gated) == 1 and any(op is train_op for op in gated[0].operations)


def test_a_stop_signal_saves_a_captured_graphs_step_and_exits_with_128_plus_it(tmp_path):
  with tfmon.Graph().as_default():
    global_step, x, y, _, _, _, train_op = _tf1_model()
    features, labels = _batch()
    with pytest.raises(SystemExit) as stopped:
      with tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        for _ in range(3):
          sess.run(train_op, feed_dict={x: features, y: labels})
        os.kill(os.getpid(), signal.SIGTERM)
        sess.run(train_op, feed_dict={x: features, y: labels})
  assert stopped.value.code == 143
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-3')  # the run after the signal ran no step
