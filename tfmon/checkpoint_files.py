"""What a checkpoint on disk is, for any floor that reads one: TF1 Saver's
name-based format (keys are variable names) or TF2's object-based one (keys are
object paths, with the object graph under `_CHECKPOINTABLE_OBJECT_GRAPH`)."""

import tensorflow as tf

OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'


def is_tf1_checkpoint(path):
  """Whether `path` is a TF1 Saver's name-based checkpoint (no TF2 object graph)."""
  return not tf.train.load_checkpoint(path).has_tensor(OBJECT_GRAPH_KEY)
