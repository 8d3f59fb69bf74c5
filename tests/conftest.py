"""Shared test setup: quiet TensorFlow, two CPU devices, and a fresh global step
and TensorFlow's log level for every test."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf

# Two logical CPU devices, so that tf.distribute tests mirror across two replicas
# on any machine. TensorFlow allows this only before it initializes its devices.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices('CPU')[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)


def pytest_configure(config):
  config.addinivalue_line(
      'markers', 'slow: runs processes of its own (workers, a fresh interpreter, '
      'a killed job): .ci/run runs them; `pytest -m "not slow"` leaves them out.')


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


@pytest.fixture(autouse=True)
def tf_logging_level():
  """Puts TensorFlow's and absl's log levels back after a test (examples set
  INFO; TF's SavedModel writing leaves absl's at WARNING)."""
  loggers = [tf.get_logger(), absl_logging.get_absl_logger()]
  levels = [logger.level for logger in loggers]
  yield
  for logger, level in zip(loggers, levels):
    logger.setLevel(level)
