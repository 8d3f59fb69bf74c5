"""A training job for test_graceful_stop: run as a process, stopped by signals.

  python -m tests.session.graceful_stop_job DIR LAST_STEP STEPS_PER_LOOP
      [--signal-at-step N] [--signal-again-while-saving]

Prints `START <global step>` once the session exists, and `STEP <n>` after
each run. With --signal-at-step the step function sends SIGTERM to its own
process from inside step N (a real signal, arriving while TensorFlow runs).
"""

import argparse
import os
import signal
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import tfmon


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('checkpoint_dir')
  parser.add_argument('last_step', type=int)
  parser.add_argument('steps_per_loop', type=int)
  parser.add_argument('--signal-at-step', type=int, default=0)
  parser.add_argument('--signal-again-while-saving', action='store_true')
  parser.add_argument('--step-secs', type=float, default=0.0)
  args = parser.parse_args()
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  global_step = tfmon.train.get_or_create_global_step()
  weight = tf.Variable(0.0)

  def send_signal(step):
    if int(step) == args.signal_at_step:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.5)  # the step in flight: time for the watcher on a busy box
    time.sleep(args.step_secs)

  def step():
    if args.signal_at_step or args.step_secs:
      tf.py_function(send_signal, [global_step + 1], [])
    weight.assign_add(1.0)
    global_step.assign_add(1)

  class SignalAgainWhileSaving(tfmon.train.CheckpointSaverListener):

    def before_save(self, session, global_step_value):
      if args.signal_again_while_saving and global_step_value > 0:
        os.kill(os.getpid(), signal.SIGTERM)
        print('SENT AGAIN', flush=True)

  hooks = [tfmon.train.StopAtStepHook(last_step=args.last_step),
           tfmon.train.CheckpointSaverHook(
               args.checkpoint_dir, save_steps=10**6,
               scaffold=tfmon.train.Scaffold(checkpoint={'weight': weight}),
               listeners=[SignalAgainWhileSaving()])]
  with tfmon.train.MonitoredSession(
      session_creator=tfmon.train.ChiefSessionCreator(
          scaffold=tfmon.train.Scaffold(checkpoint={'weight': weight}),
          checkpoint_dir=args.checkpoint_dir),
      hooks=hooks, steps_per_loop=args.steps_per_loop) as sess:
    print('START', int(global_step.numpy()), flush=True)
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
      print('STEP', int(global_step.numpy()), flush=True)
  print('DONE', int(global_step.numpy()), float(weight.numpy()), flush=True)


if __name__ == '__main__':
  sys.exit(main())
