"""WorkerAgreement: what the workers of a multi-worker strategy agree on, per call.

Under MultiWorkerMirroredStrategy every worker must make the same collective
calls in the same order: TensorFlow gives each collective op of a call the next
instance key of a per-process counter when the call starts (it does not
matter which function holds it, only the order). A worker that stops alone
leaves the others blocked in their next step's all-reduce, and a worker whose
fused loop runs more steps than another's does the same.

So each compiled call of a multi-worker session starts with one all-gather of
a few int64 values, and every worker reduces the gathered rows the same way:

  - `stop`: the largest stop code any worker asks for (0: none, 1: a hook or
    the coordinator asked, else the number of the signal that stops it). A
    call that agrees to stop runs no step: every worker stops after the same
    step, the last one they all ran.
  - `save`: whether any worker's CheckpointSaverHook, on a timer in seconds,
    asks that every worker save after this call (a save may hold collectives,
    e.g. reading a sync-on-read variable, so all save at the same step).
  - how many steps the call's loop runs and the global step it ends at: the
    smallest any worker asks for, so no worker's loop outruns another's.

The agreement travels inside the call, so it costs no extra round trip. A worker
that wants to stop makes one more call, which runs no step, to tell the others:
the session replays its last call (the same collective ops, so the counters
stay in step), or before any run, a call holding only the all-gather.

A captured graph's training run cannot carry the agreement (its function is
the graph's own ops), so it makes the agreement's call first (`call`), then
runs the agreed steps, or none; a worker stopping alone makes the same call
(`barrier`) with its stop code, which the others' next run's call meets.
"""

import functools

import tensorflow as tf

# Positions in the agreed vector.
STOP, SAVE, STEPS, TARGET = range(4)


class WorkerAgreement:
  """The agreement state of one multi-worker session (see the module doc).

  Args:
    strategy: The multi-worker `tf.distribute.Strategy`.
  """

  def __init__(self, strategy):
    self.strategy = strategy
    self.wanted_stop = 0     # this worker's stop code for the next call
    self.wanted_save = False
    self.agreed_stop = 0     # what the last call agreed
    self.agreed_save = False
    self._call = None  # `agree` alone (call, barrier), made at first use

  def inputs(self):
    """This worker's wishes as call inputs: `(stop, save)` int64 tensors."""
    return [_int64(self.wanted_stop), _int64(int(self.wanted_save))]

  def agree(self, stop, save, steps, target):
    """Traced: the workers' agreed `(stop, save, steps, target)`, int64 tensors.

    Each worker gives its wishes; the result is the same on every worker.
    """
    wishes = tf.stack([tf.cast(stop, tf.int64), tf.cast(save, tf.int64),
                       -tf.cast(steps, tf.int64), -tf.cast(target, tf.int64)])
    strategy = self.strategy
    gathered = strategy.experimental_local_results(strategy.run(
        lambda w: tf.distribute.get_replica_context().all_gather(w[None], axis=0),
        args=(wishes,)))[0]
    agreed = tf.reduce_max(gathered, axis=0)
    return (agreed[STOP], agreed[SAVE], -agreed[STEPS], -agreed[TARGET])

  def record(self, stop, save):
    """Keeps what a call agreed; the wishes it carried are spent."""
    self.agreed_stop = int(stop)
    self.agreed_save = bool(save)
    self.wanted_save = False

  def call(self, steps, target):
    """A call holding only the agreement, made before a run that cannot carry
    it (a captured graph's): this worker's wishes, at most `steps` steps
    ending at global step `target`; returns what the workers agreed, as ints
    `(stop, steps, target)`, and records it."""
    stop, save, steps, target = self._agree_alone(
        self.wanted_stop, int(self.wanted_save), steps, target)
    self.record(stop, save)
    return stop, steps, target

  def barrier(self, stop=0):
    """A call holding only the agreement: returns the agreed stop code.

    Every worker calls it at the same points (session creation), or a worker
    that stops before its first run calls it to tell the others.
    """
    agreed = self._agree_alone(stop, 0, 0, 0)[0]
    self.agreed_stop = max(self.agreed_stop, agreed)
    return agreed

  def _agree_alone(self, stop, save, steps, target):
    """`agree` in a call of its own: the agreed values, as ints."""
    if self._call is None:
      self._call = tf.function(self.agree, autograph=False)
    with self.strategy.scope():
      return [int(value) for value in self._call(
          _int64(stop), _int64(save), tf.constant(steps, tf.int64),
          tf.constant(target, tf.int64))]


@functools.cache
def _int64(value):
  """`value` as a cached int64 tensor: a call's wishes are nearly always 0."""
  return tf.constant(value, tf.int64)
