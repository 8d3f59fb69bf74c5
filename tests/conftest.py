"""Shared test setup: quiet TensorFlow, and a fresh global step for every test."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf


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
