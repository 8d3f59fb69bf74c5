"""tfmon's INFO lines show with either habit of TF users (SPEC section 5), in a
fresh process each, as a user's script starts, and read as a TF1 job's did:
the same format and the same lines, which users grep for."""

import os
import re
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


# A TF1 job's lines, for a small job run twice in one directory: once from
# scratch to step 2, once resumed to step 4. Only the TF1 habit's one line of
# logging set-up, as in a TF1 script.
_JOB = textwrap.dedent('''
    import sys
    import tensorflow as tf
    import tfmon

    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    global_step = tfmon.train.get_or_create_global_step()
    weight = tf.Variable(1.0)

    def train_step():
      weight.assign_add(1.0)
      global_step.assign_add(1)
      return {'loss': weight * 2}

    hooks = [tfmon.train.StopAtStepHook(last_step=int(sys.argv[2]))]
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=sys.argv[1], save_checkpoint_steps=2, hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(train_step)
''')


def _stderr_lines(script, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  result = subprocess.run([sys.executable, '-c', script, *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
  return result.stderr.splitlines()


@pytest.fixture(scope='module')
def job_logs(tmp_path_factory):
  """(directory, lines of the fresh run, lines of the resumed run)."""
  directory = tmp_path_factory.mktemp('train')
  return directory, _stderr_lines(_JOB, directory, 2), _stderr_lines(_JOB, directory, 4)


def test_lines_print_as_tf1_printed_them_when_logging_is_not_configured(job_logs):
  directory, fresh, resumed = job_logs
  assert f'INFO:tensorflow:Saving checkpoints for 0 into {directory}/model.ckpt.' in fresh
  assert f'INFO:tensorflow:Restoring parameters from {directory}/model.ckpt-2' in resumed
  # absl's format (`I1125 21:21:32.123456 1234 file.py:12] ...`) is for
  # absl.app.run, which configures it; not for a script that configured nothing.
  absl_format = re.compile(r'[DIWEF]\d{4} [\d:.]+ +\d+ \S+\.py:\d+\] ')
  assert not [line for line in fresh + resumed if absl_format.match(line)]


# What TF1's MonitoredTrainingSession logs while it creates a session, in order
# (tensorflow/python/training/monitored_session.py, Scaffold.finalize;
# session_manager.py, SessionManager._try_run_local_init_op: TF1's default
# local_init_op always exists, so these print on every creation).
_TF1_CREATION = ['Create CheckpointSaverHook.', 'Graph was finalized.',
                 'Restoring parameters from', 'Running local_init_op.',
                 'Done running local_init_op.']


def _creation_lines(lines):
  messages = [line[len('INFO:tensorflow:'):] for line in lines
              if line.startswith('INFO:tensorflow:')]
  return [next(line for line in _TF1_CREATION if message.startswith(line))
          for message in messages if message.startswith(tuple(_TF1_CREATION))]


def test_session_creation_logs_tf1s_lines_in_tf1s_order(job_logs):
  _, fresh, resumed = job_logs
  assert _creation_lines(fresh) == [line for line in _TF1_CREATION
                                    if line != 'Restoring parameters from']
  assert _creation_lines(resumed) == _TF1_CREATION


def test_no_debug_line_listing_the_hooks(job_logs):
  _, fresh, resumed = job_logs
  assert not [line for line in fresh + resumed if 'all_hooks' in line]


_RETRACING = textwrap.dedent('''
    import tensorflow as tf
    import tfmon

    global_step = tfmon.train.get_or_create_global_step()
    with tfmon.train.MonitoredSession() as sess:
      for _ in range(5):  # a new step function every run: tfmon warns
        sess.run(tfmon.train.op(lambda: global_step.assign_add(1)))
''')


def test_tfmon_warnings_go_to_tensorflows_logger_too():
  lines = _stderr_lines(_RETRACING)
  assert [line for line in lines
          if line.startswith('WARNING:tensorflow:run() has traced 5 different step')]
  assert not [line for line in lines if line.startswith('WARNING:absl:')]
