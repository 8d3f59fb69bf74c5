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
    # A root handler added after TF gave its logger one (as absl.app.run does):
    # still one line each of tfmon's, not two.
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


# A TF1 job as TF's CIFAR-10 tutorial writes it (a ConfigProto of defaults, TF's
# LoggingTensorHook, a relative checkpoint_dir), both verbosity habits on. Run
# with argv[1] 'tf1', it is TF1's graph mode, the reference; with 'tfmon', its
# port: `tf.Graph` and `tf.compat.v1.train` renamed, nothing else. Its fresh run
# to step 3 saves at steps 0, 2 and 3; the resumed run restores step 3 and
# goes on to step 5.
_TF1_JOB = textwrap.dedent('''
    import sys
    import absl.logging
    import tensorflow as tf
    import tfmon

    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    absl.logging.set_verbosity('info')
    if sys.argv[1] == 'tf1':
      Graph, train = tf.Graph, tf.compat.v1.train
    else:
      Graph, train = tfmon.Graph, tfmon.train

    with Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      weight = tf.compat.v1.get_variable('weight', initializer=1.0)
      # Not read from `weight`: a fetch reading a variable the same run assigns
      # reads either value in TF1.
      loss = tf.constant(0.5, name='loss')
      train_op = tf.group(weight.assign_add(1.0), global_step.assign_add(1))
      hooks = [train.StopAtStepHook(last_step=int(sys.argv[2])),
               tf.compat.v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=1),
               train.LoggingTensorHook({'half_loss': loss / 2}, every_n_iter=1)]
      with train.MonitoredTrainingSession(
          checkpoint_dir='train', save_checkpoint_steps=2, hooks=hooks,
          config=tf.compat.v1.ConfigProto(log_device_placement=False)) as sess:
        while not sess.should_stop():
          sess.run(train_op)
          tf.compat.v1.logging.info('a line of the script')
''')


@pytest.fixture(scope='module')
def tf1_job_logs(tmp_path_factory):
  """{'tf1' or 'tfmon': (lines of the fresh run to step 3, of the resumed run
  to step 5)}, TF1's runs and tfmon's in a directory each."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  logs = {}
  for how in ('tf1', 'tfmon'):
    cwd = tmp_path_factory.mktemp(how)
    logs[how] = tuple(
        subprocess.run([sys.executable, '-c', _TF1_JOB, how, str(last_step)],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                       check=True).stderr.splitlines()
        for last_step in (3, 5))
  return logs


def _without_timing(line):
  return re.sub(r' \([\d.]+ sec\)$', '', line)


def test_each_line_prints_once_after_a_checkpoint_save(tf1_job_logs):
  for how, (fresh, _) in tf1_job_logs.items():
    fresh = [_without_timing(line) for line in fresh]
    # Steps 1 to 3, after the saves at 0 and 2: TF's hook, tfmon's (TF's under
    # TF1) and the script's own line, once each, as TF1 printed them.
    assert fresh.count('INFO:tensorflow:loss = 0.5') == 3, (how, fresh)
    assert fresh.count('INFO:tensorflow:half_loss = 0.25') == 3, (how, fresh)
    assert fresh.count('INFO:tensorflow:a line of the script') == 3, (how, fresh)


def test_no_line_of_tensorflows_checkpoint_writer(tf1_job_logs):
  # TF 2.21's writer logs the sharding callback's duration on every save, at
  # INFO on absl's logger; TF1's saves logged nothing of theirs.
  for how, runs in tf1_job_logs.items():
    lines = [line for run in runs for line in run]
    assert not [line for line in lines if 'Sharding callback duration' in line], how
    assert not [line for line in lines if line.startswith('INFO:absl:')], how


def test_no_warning_for_a_config_of_tf2s_defaults(tf1_job_logs):
  for how, runs in tf1_job_logs.items():
    lines = [line for run in runs for line in run]
    assert not [line for line in lines if 'config' in line], (how, lines)


def test_checkpoint_paths_are_logged_as_given(tf1_job_logs):
  for how, (fresh, resumed) in tf1_job_logs.items():
    assert 'INFO:tensorflow:Saving checkpoints for 2 into train/model.ckpt.' in fresh, (
        how, fresh)
    assert 'INFO:tensorflow:Restoring parameters from train/model.ckpt-3' in resumed, (
        how, resumed)
    assert 'INFO:tensorflow:Saving checkpoints for 5 into train/model.ckpt.' in resumed, (
        how, resumed)


def test_a_config_asking_for_more_than_tf2s_defaults_is_named_in_a_warning():
  lines = _stderr_lines(textwrap.dedent('''
      import tensorflow as tf
      import tfmon

      tfmon.train.ChiefSessionCreator(config=tf.compat.v1.ConfigProto(
          allow_soft_placement=True, log_device_placement=True))
  '''))
  assert [line for line in lines if 'config' in line] == [
      'WARNING:tensorflow:config sets log_device_placement, which tfmon does not '
      'apply: configure TensorFlow with tf.config instead.']
