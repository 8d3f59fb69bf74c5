"""constant_increment: what a traced call adds to the global step, from its graph."""

import pytest
import tensorflow as tf

from tfmon.compiled import step_increment


def _coin():
  return tf.random.uniform([]) > 0.5


@pytest.mark.parametrize('step, expected', [
    (lambda step: step.assign_add(1), 1),
    (lambda step: (step.assign_add(3), step.assign_sub(1), step.read_value()), 2),
    # Unknown: the value added depends on data.
    (lambda step: step.assign_add(tf.cast(_coin(), tf.int64)), None),
    # Unknown: inside control flow, whichever branch runs.
    (lambda step: tf.cond(_coin(), lambda: step.assign_add(1),
                          lambda: step.assign_add(1)), None),
    (lambda step: step.assign(5), None),
    # Known to add nothing: the session then reads it back after every run.
    (lambda step: step.read_value() + 1, 0),
    (lambda step: (step.assign_add(1), step.assign_sub(1)), 0),
    (lambda step: tf.constant(1), 0),
], ids=['add 1', 'add 3, subtract 1', 'data-dependent', 'in a cond', 'assign',
        'read only', 'adds up to 0', 'not used'])
def test_constant_increment(step, expected):
  global_step = tf.Variable(0, dtype=tf.int64)
  graph = tf.function(lambda: step(global_step)).get_concrete_function().graph
  assert step_increment.constant_increment(graph, global_step) == expected
