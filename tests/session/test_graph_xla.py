"""XLA for a captured graph, as in TF1: `tf.xla.experimental.jit_scope()`
compiles the ops in it; `jit_compile=True`, or a ConfigProto's
`global_jit_level`, auto-clusters the graph's functions."""

import functools
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfmon

_JOB = r'''
import sys, tempfile
import numpy as np, tensorflow as tf, tfmon
v1 = tf.compat.v1
with tfmon.Graph().as_default():
  v1.set_random_seed(1)
  data = tf.data.Dataset.from_tensors(
      (np.ones([16, 8], np.float32), np.zeros([16], np.int64))).repeat()
  x, y = v1.data.make_one_shot_iterator(data).get_next()
  scope = tf.xla.experimental.jit_scope(compile_ops=sys.argv[1] == 'jit_scope')
  with scope:  # a summary and an iterator in it: XLA leaves what it cannot compile
    hidden = tf.nn.relu(tf.matmul(x, v1.get_variable('w', [8, 8])) * 1.5 + 0.1)
    logits = tf.matmul(hidden, v1.get_variable('v', [8, 3]))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=logits))
    v1.summary.scalar('loss', loss)
  train_op = v1.train.AdamOptimizer(0.1).minimize(
      loss, global_step=v1.train.get_or_create_global_step())
  config = v1.ConfigProto()
  if sys.argv[1] == 'config':  # TF1's switch for XLA's auto-clustering
    config.graph_options.optimizer_options.global_jit_level = v1.OptimizerOptions.ON_1
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=tempfile.mkdtemp(), save_summaries_steps=2, config=config,
      jit_compile=sys.argv[1] == 'jit_compile' or None,
      hooks=[v1.train.StopAtStepHook(last_step=6)]) as sess:
    while not sess.should_stop():
      value = sess.run([train_op, loss])[1]
print('LOSS', repr(float(value)))
'''


@functools.cache
def _run(mode, **env):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0', **env)
  done = subprocess.run([sys.executable, '-c', _JOB, mode], capture_output=True,
                        text=True, timeout=120, env=env, check=True)
  return float(done.stdout.split('LOSS ')[1]), 'Compiled cluster using XLA' in done.stderr


def test_tf1s_jit_scope_compiles_its_ops_with_xla_and_trains_the_same():
  plain, plain_compiled = _run('plain')
  loss, compiled = _run('jit_scope')
  assert compiled and not plain_compiled
  assert loss == pytest.approx(plain, rel=1e-4)


@pytest.mark.parametrize('mode', ['jit_compile', 'config'])
def test_jit_compile_and_tf1s_global_jit_level_auto_cluster_as_tf1_did(mode):
  # On CPU, TF1's auto-clustering needs this flag before TensorFlow starts.
  plain, _ = _run('plain')
  loss, compiled = _run(mode, TF_XLA_FLAGS='--tf_xla_cpu_global_jit')
  assert compiled
  assert loss == pytest.approx(plain, rel=1e-4)


def test_auto_clustering_without_the_cpu_flag_says_so_and_ends_with_the_session(caplog):
  assert not tf.config.optimizer.get_jit()
  with tfmon.Graph().as_default():
    train_op = tf.compat.v1.assign_add(tf.compat.v1.train.get_or_create_global_step(), 1)
    with tfmon.train.MonitoredSession(jit_compile=True) as sess:
      assert tf.config.optimizer.get_jit() == 'autoclustering'
      sess.run(train_op)
  assert not tf.config.optimizer.get_jit()
  assert 'TF_XLA_FLAGS=--tf_xla_cpu_global_jit is set before TensorFlow starts' in caplog.text
