"""Sessions in threads: created, run and closed in any thread, as TF1 allowed."""

import signal
import threading

import tensorflow as tf

import tfmon


def _in_thread(fn):
  """Runs `fn` in a new thread; returns what it returned, or raises what it raised."""
  outcome = {}

  def target():
    try:
      outcome['value'] = fn()
    except BaseException as e:  # pylint: disable=broad-except
      outcome['error'] = e

  thread = threading.Thread(target=target)
  thread.start()
  thread.join()
  if 'error' in outcome:
    raise outcome['error']
  return outcome['value']


class _SeesGlobalStep(tfmon.train.SessionRunHook):
  """A TF1 hook: it finds the global step with TensorFlow's own function."""

  def begin(self):
    self.global_step = tf.compat.v1.train.get_global_step()


def test_a_session_is_created_run_and_closed_in_a_worker_thread(tmp_path):
  global_step = tfmon.train.get_or_create_global_step()  # in the main thread
  hook = _SeesGlobalStep()

  def train():
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
        hooks=[hook, tfmon.train.StopAtStepHook(last_step=3)]) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(lambda: global_step.assign_add(1)))
    return tfmon.train.get_global_step()

  assert _in_thread(train) is global_step
  assert hook.global_step is global_step
  assert int(global_step.numpy()) == 3
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-3')


def test_a_session_closed_in_another_thread_hands_its_signals_back_on_the_next_one():
  received = []
  previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
  try:
    tfmon.train.get_or_create_global_step()
    sess = tfmon.train.MonitoredSession(graceful_stop_signals=(signal.SIGUSR1,))
    sess.run(lambda: None)
    _in_thread(sess.close)  # raised "signal only works in main thread" before
    # The session is closed: the signal is not its any more.
    signal.raise_signal(signal.SIGUSR1)
    assert received == [signal.SIGUSR1]
    signal.raise_signal(signal.SIGUSR1)  # the previous handler is back in place
    assert received == [signal.SIGUSR1] * 2
  finally:
    signal.signal(signal.SIGUSR1, previous)
