"""The hook API types: TensorFlow's own `tf.compat.v1.train` classes.

tfmon does not redefine `SessionRunHook`, `SessionRunArgs`, `SessionRunContext` or
`SessionRunValues`: it uses TensorFlow's classes, which are plain Python and work
eagerly. That makes tfmon hooks and `tf.compat.v1.train` hooks one and the same
type, so a hook written for TF1 runs under tfmon unchanged and a tfmon hook is an
instance of `tf.compat.v1.train.SessionRunHook`.
"""

import tensorflow as tf

SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs
SessionRunContext = tf.compat.v1.train.SessionRunContext
SessionRunValues = tf.compat.v1.train.SessionRunValues

__all__ = ['SessionRunHook', 'SessionRunArgs', 'SessionRunContext', 'SessionRunValues']
