"""Global-step helpers, as TF1's training_util.py: TensorFlow's own functions.

`tf.compat.v1.train.get_or_create_global_step()` works eagerly and registers the
variable in the default graph's GLOBAL_STEP collection; re-exporting TF's functions
(rather than keeping a registry of our own) means a step function, a TF1 hook and
tfmon all see the same variable.
"""

import threading

import tensorflow as tf

from tfmon.compiled import graph_capture

create_global_step = tf.compat.v1.train.create_global_step

# Eagerly, TensorFlow keeps a default graph per thread, so a global step made in
# the main thread is in no other thread's GLOBAL_STEP collection. The main
# thread's graph, remembered at import, is where other threads look next.
_MAIN_THREAD_GRAPH = (tf.compat.v1.get_default_graph()
                      if threading.current_thread() is threading.main_thread()
                      else None)


def get_global_step(graph=None):
  """TensorFlow's `get_global_step`, which also finds, from any thread, the
  global step created eagerly in the main thread."""
  step = tf.compat.v1.train.get_global_step(graph)
  if step is None and graph is None:
    captured = graph_capture.current()  # a session on a captured graph runs eagerly
    if captured is not None:
      step = tf.compat.v1.train.get_global_step(captured)
  if (step is None and graph is None and _MAIN_THREAD_GRAPH is not None and
      tf.executing_eagerly() and
      threading.current_thread() is not threading.main_thread()):
    step = tf.compat.v1.train.get_global_step(_MAIN_THREAD_GRAPH)
  return step


def get_or_create_global_step(graph=None):
  """TensorFlow's `get_or_create_global_step`, finding it as `get_global_step`."""
  step = get_global_step(graph)
  return step if step is not None else tf.compat.v1.train.create_global_step(graph)


def share_global_step_with_this_thread():
  """Registers the main thread's global step in this thread's default graph too,
  so that TensorFlow's own `tf.compat.v1.train.get_global_step()`, which TF1
  hooks call in `begin`, finds it in a session made in another thread."""
  if tf.compat.v1.train.get_global_step() is None:
    step = get_global_step()
    if step is not None:
      tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP, step)


def global_step(sess, global_step_tensor):
  """Returns the global step value as an int.

  Args:
    sess: A tfmon session (any object with `run`), or None when the global step
      is an eager variable, which it always is under tfmon.
    global_step_tensor: The global step `tf.Variable`, or its name.

  Returns:
    The global step value.
  """
  if isinstance(global_step_tensor, str):
    if sess is None:
      raise ValueError(
          f'global_step_tensor {global_step_tensor!r} is a name: pass the session '
          'that can resolve it, or pass the variable itself.')
    return int(sess.run(global_step_tensor))
  if hasattr(global_step_tensor, 'numpy'):
    return int(global_step_tensor.numpy())
  return int(sess.run(global_step_tensor))


def global_step_after_run(run_context, global_step_tensor):
  """The global step as the run of `run_context` left it, as an int.

  Hooks called by a session that tracks the global step (one with step fusion or
  hooks that declare when they need a run) find it in
  `run_context.global_step_after`, read with the run's own outputs, without a
  TensorFlow call of their own; elsewhere it is read with `session.run`, as v1's
  hooks did (which also sees changes that earlier hooks' `after_run` made).
  """
  value = getattr(run_context, 'global_step_after', None)
  if value is None:
    return int(run_context.session.run(global_step_tensor))
  return value


def require_global_step(user):
  """Returns the global step variable, or raises v1's error naming `user`."""
  step = get_global_step()
  if step is None:
    raise RuntimeError(
        f'Global step should be created to use {user}. Create it before the '
        'session with `global_step = tfmon.train.get_or_create_global_step()` '
        'and increment it in your step function with '
        '`global_step.assign_add(1)`.')
  return step
