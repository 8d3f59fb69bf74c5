"""tfmon's INFO lines show with either habit of TF users (SPEC section 5), in a
fresh process each, as a user's script starts."""

import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent('''
    import sys
    import tensorflow as tf
    import tfmon

    global_step = tfmon.train.get_or_create_global_step()

    def train_step():
      global_step.assign_add(1)
      return {'loss': tf.constant(0.5)}

    def train(last_step):
      hooks = [tfmon.train.StopAtStepHook(last_step=last_step),
               tfmon.train.LoggingTensorHook(['loss'], every_n_iter=1)]
      with tfmon.train.MonitoredSession(hooks=hooks) as sess:
        while not sess.should_stop():
          sess.run(train_step)

    train(2)  # nothing asked: Python's default level, WARNING, hides INFO
    # A root handler added after TF gave its logger one (as TF's checkpoint code
    # does, through Python's logging.info): still one line each, not two.
    import logging
    logging.basicConfig()
    print('--- verbosity set ---', file=sys.stderr, flush=True)
    if sys.argv[1] == 'tf1':
      tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    else:
      import absl.logging
      absl.logging.set_verbosity('info')
    train(4)
''')


@pytest.mark.parametrize('habit', ['tf1', 'absl'])
def test_info_lines_show_with_either_verbosity_habit(habit):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  result = subprocess.run([sys.executable, '-c', _SCRIPT, habit], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
  before, after = result.stderr.split('--- verbosity set ---')
  assert 'loss = 0.5' not in before
  # Steps 3 and 4, on TensorFlow's logger, in its format, as v1's hook logged.
  assert after.count('INFO:tensorflow:loss = 0.5') == 2, result.stderr
