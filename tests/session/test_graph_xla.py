"""XLA for a captured graph: TF1's `tf.xla.experimental.jit_scope()` compiles the
ops in it, as in TF1; `jit_compile=True` (every op) is refused with that fix."""

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
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=tempfile.mkdtemp(), save_summaries_steps=2,
      hooks=[v1.train.StopAtStepHook(last_step=6)]) as sess:
    while not sess.should_stop():
      value = sess.run([train_op, loss])[1]
print('LOSS', repr(float(value)))
'''


def _run(mode):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0')
  done = subprocess.run([sys.executable, '-c', _JOB, mode], capture_output=True,
                        text=True, timeout=120, env=env, check=True)
  return float(done.stdout.split('LOSS ')[1]), 'Compiled cluster using XLA' in done.stderr


def test_tf1s_jit_scope_compiles_its_ops_with_xla_and_trains_the_same():
  plain, plain_compiled = _run('plain')
  loss, compiled = _run('jit_scope')
  assert compiled and not plain_compiled
  assert loss == pytest.approx(plain, rel=1e-4)


def test_jit_compile_of_a_whole_captured_graph_is_refused_naming_jit_scope():
  with tfmon.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    with pytest.raises(ValueError, match=r'jit_compile=True with a captured TF1 graph.*'
                       r'tf.xla.experimental.jit_scope'):
      tfmon.train.MonitoredSession(jit_compile=True)
