"""TF1 graph code built once per replica under MirroredStrategy, on conftest's
two logical CPUs: it trains the weights one device trains on the whole batch."""

import numpy as np
import pytest
import tensorflow as tf

import tfmon


def _mirrored():
  return tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])


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
