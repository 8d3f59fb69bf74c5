"""Shared test setup: quiet TensorFlow, two CPU devices, and a fresh global step
for every test."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf

# Two logical CPU devices, so that tf.distribute tests mirror across two replicas
# on any machine. TensorFlow allows this only before it initializes its devices.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices('CPU')[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)


@pytest.fixture(autouse=True)
def fresh_global_step():
  """Forgets the global step registered by an earlier test.

  The global step lives in the GLOBAL_STEP collection of TensorFlow's default
  graph, which eager mode keeps for the whole process.
  """
  graph = tf.compat.v1.get_default_graph()
  graph.clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)
  yield
  graph.clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)
