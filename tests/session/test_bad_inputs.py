"""The bad-input matrix: every public constructor and run() argument given a wrong
type or value fails at once, with the error type and a message naming the value;
hooks raising in each lifecycle method; steps returning non-tensor values."""

import re
import signal

import pytest
import tensorflow as tf

import tfmon
from tfmon.session import graceful_stop

T = tfmon.train
_DIR = '/tmp/tfmon_bad_inputs_never_written'

# (constructor call, error type, text the message must hold)
_CONSTRUCTORS = {
    'MonitoredSession hooks=5': (lambda: T.MonitoredSession(hooks=5), TypeError, 'got 5 of type int'),
    'MonitoredSession hooks=[1]': (lambda: T.MonitoredSession(hooks=[1]), TypeError, 'hooks[0] is 1 of type int'),
    'MonitoredSession hooks=hook': (lambda: T.MonitoredSession(hooks=T.StepCounterHook()), TypeError, 'Pass hooks=[hook]'),
    'MonitoredSession session_creator=1': (lambda: T.MonitoredSession(session_creator=1), TypeError, 'got 1'),
    "MonitoredSession session_creator=TF's ChiefSessionCreator": (lambda: T.MonitoredSession(session_creator=tf.compat.v1.train.ChiefSessionCreator()), TypeError, "TensorFlow's tf.compat.v1.train.ChiefSessionCreator, which makes a TF1 Session; a tfmon session takes tfmon.train.ChiefSessionCreator"),
    "MonitoredSession session_creator=TF's WorkerSessionCreator": (lambda: T.MonitoredSession(session_creator=tf.compat.v1.train.WorkerSessionCreator()), TypeError, "tf.compat.v1.train.WorkerSessionCreator, which makes a TF1 Session"),
    'MonitoredSession steps_per_loop=0': (lambda: T.MonitoredSession(steps_per_loop=0), ValueError, 'steps_per_loop=0'),
    'MonitoredSession steps_per_loop=2.5': (lambda: T.MonitoredSession(steps_per_loop=2.5), ValueError, 'steps_per_loop=2.5'),
    'MonitoredSession steps_per_loop=True': (lambda: T.MonitoredSession(steps_per_loop=True), ValueError, 'steps_per_loop=True'),
    'MonitoredSession strategy=1': (lambda: T.MonitoredSession(strategy=1), TypeError, 'strategy=1'),
    'MonitoredSession stop_grace_period_secs=-1': (lambda: T.MonitoredSession(stop_grace_period_secs=-1), ValueError, 'stop_grace_period_secs=-1'),
    "MonitoredSession stop_grace_period_secs='x'": (lambda: T.MonitoredSession(stop_grace_period_secs='x'), TypeError, "stop_grace_period_secs='x'"),
    'MonitoredSession profile_dir=1': (lambda: T.MonitoredSession(profile_dir=1), TypeError, 'profile_dir=1'),
    'MonitoredSession graceful_stop_signals=15': (lambda: T.MonitoredSession(graceful_stop_signals=15), TypeError, 'graceful_stop_signals=15'),
    'SingularMonitoredSession scaffold=1': (lambda: T.SingularMonitoredSession(scaffold=1), TypeError, 'got 1 of type int'),
    'SingularMonitoredSession checkpoint_dir=1': (lambda: T.SingularMonitoredSession(checkpoint_dir=1), TypeError, 'checkpoint_dir=1'),
    'MTS checkpoint_dir=1': (lambda: T.MonitoredTrainingSession(checkpoint_dir=1), TypeError, 'checkpoint_dir=1'),
    'MTS summary_dir=1': (lambda: T.MonitoredTrainingSession(summary_dir=1), TypeError, 'summary_dir=1'),
    "MTS is_chief='x'": (lambda: T.MonitoredTrainingSession(is_chief='x'), TypeError, "is_chief='x'"),
    'MTS save_checkpoint_steps=-1': (lambda: T.MonitoredTrainingSession(checkpoint_dir=_DIR, save_checkpoint_steps=-1), ValueError, 'save_checkpoint_steps=-1'),
    "MTS save_checkpoint_steps='x'": (lambda: T.MonitoredTrainingSession(checkpoint_dir=_DIR, save_checkpoint_steps='x'), TypeError, "save_checkpoint_steps='x'"),
    'MTS save_checkpoint_secs=-1': (lambda: T.MonitoredTrainingSession(checkpoint_dir=_DIR, save_checkpoint_secs=-1), ValueError, 'save_checkpoint_secs=-1'),
    "MTS save_summaries_steps='x'": (lambda: T.MonitoredTrainingSession(save_summaries_steps='x'), TypeError, "save_summaries_steps='x'"),
    'MTS save_summaries_secs=-5': (lambda: T.MonitoredTrainingSession(save_summaries_secs=-5), ValueError, 'save_summaries_secs=-5'),
    "MTS log_step_count_steps='x'": (lambda: T.MonitoredTrainingSession(log_step_count_steps='x'), TypeError, "log_step_count_steps='x'"),
    'MTS max_to_keep=-1': (lambda: T.MonitoredTrainingSession(max_to_keep=-1), ValueError, 'max_to_keep=-1'),
    "MTS max_to_keep='x'": (lambda: T.MonitoredTrainingSession(max_to_keep='x'), TypeError, "max_to_keep='x'"),
    'MTS keep_checkpoint_every_n_hours=-1': (lambda: T.MonitoredTrainingSession(keep_checkpoint_every_n_hours=-1), ValueError, 'keep_checkpoint_every_n_hours=-1'),
    'MTS checkpoint=1': (lambda: T.MonitoredTrainingSession(checkpoint=1), TypeError, 'checkpoint=1 of type int'),
    "MTS scaffold=TF's Scaffold": (lambda: T.MonitoredTrainingSession(scaffold=tf.compat.v1.train.Scaffold()), TypeError, "is TensorFlow's tf.compat.v1.train.Scaffold; a tfmon session takes tfmon.train.Scaffold, with the same arguments"),
    'MTS scaffold=1': (lambda: T.MonitoredTrainingSession(scaffold=1), TypeError, 'got 1 of type int'),
    'MTS hooks=[1]': (lambda: T.MonitoredTrainingSession(hooks=[1]), TypeError, 'hooks[0] is 1'),
    'MTS chief_only_hooks=1': (lambda: T.MonitoredTrainingSession(chief_only_hooks=1), TypeError, 'got 1 of type int'),
    "MTS graceful_stop_signals=['SIGTERM']": (lambda: T.MonitoredTrainingSession(graceful_stop_signals=['SIGTERM']), TypeError, "'SIGTERM' of type str"),
    'MTS graceful_stop_signals=[SIGKILL]': (lambda: T.MonitoredTrainingSession(graceful_stop_signals=[signal.SIGKILL]), ValueError, 'SIGKILL'),
    'Scaffold init_fn=1': (lambda: T.Scaffold(init_fn=1), TypeError, 'got 1 of type int'),
    'Scaffold local_init_fn=1': (lambda: T.Scaffold(local_init_fn=1), TypeError, 'got 1 of type int'),
    'Scaffold checkpoint=1': (lambda: T.Scaffold(checkpoint=1), TypeError, 'checkpoint=1 of type int'),
    "Scaffold checkpoint={'m': 1}": (lambda: T.Scaffold(checkpoint={'m': 1}), TypeError, "checkpoint['m'] = 1 of type int"),
    'Scaffold summary_op=1': (lambda: T.Scaffold(summary_op=1), TypeError, 'summary_op 1 is not callable'),
    'ChiefSessionCreator scaffold=1': (lambda: T.ChiefSessionCreator(scaffold=1), TypeError, 'got 1 of type int'),
    'ChiefSessionCreator checkpoint_dir=1': (lambda: T.ChiefSessionCreator(checkpoint_dir=1), TypeError, 'checkpoint_dir=1'),
    'ChiefSessionCreator checkpoint_filename_with_path=1': (lambda: T.ChiefSessionCreator(checkpoint_filename_with_path=1), TypeError, 'checkpoint_filename_with_path=1'),
    'ChiefSessionCreator checkpoint_filename_with_path missing': (lambda: T.ChiefSessionCreator(checkpoint_filename_with_path=_DIR + '/model.ckpt-3').create_session(), ValueError, f'Checkpoint {_DIR}/model.ckpt-3 does not exist'),
    'WorkerSessionCreator scaffold=1': (lambda: T.WorkerSessionCreator(scaffold=1), TypeError, 'got 1 of type int'),
    'CheckpointSaverHook no dir': (lambda: T.CheckpointSaverHook(None, save_steps=1), ValueError, 'needs a checkpoint_dir'),
    'CheckpointSaverHook checkpoint_dir=1': (lambda: T.CheckpointSaverHook(1, save_steps=1), TypeError, 'checkpoint_dir=1'),
    'CheckpointSaverHook both timers': (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, save_secs=1), ValueError, 'both every_secs and every_steps'),
    'CheckpointSaverHook save_steps=-1': (lambda: T.CheckpointSaverHook(_DIR, save_steps=-1), ValueError, 'save_steps=-1'),
    "CheckpointSaverHook save_steps='x'": (lambda: T.CheckpointSaverHook(_DIR, save_steps='x'), TypeError, "save_steps='x'"),
    'CheckpointSaverHook save_secs=0': (lambda: T.CheckpointSaverHook(_DIR, save_secs=0), ValueError, 'save_secs=0'),
    'CheckpointSaverHook saver=1': (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, saver=1), TypeError, 'saver=1 of type int'),
    'CheckpointSaverHook listeners=1': (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, listeners=1), TypeError, 'listeners=1'),
    'CheckpointSaverHook listeners=[1]': (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, listeners=[1]), TypeError, 'listeners[0] is 1 of type int'),
    'CheckpointSaverHook checkpoint_basename=1': (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, checkpoint_basename=1), TypeError, 'checkpoint_basename=1'),
    "CheckpointSaverHook max_to_keep='x'": (lambda: T.CheckpointSaverHook(_DIR, save_steps=1, max_to_keep='x'), TypeError, "max_to_keep='x'"),
    'SummarySaverHook no output': (lambda: T.SummarySaverHook(save_steps=1), ValueError, 'needs output_dir or summary_writer'),
    "SummarySaverHook save_steps='x'": (lambda: T.SummarySaverHook(save_steps='x', output_dir=_DIR), TypeError, "save_steps='x'"),
    'SummarySaverHook save_secs=-1': (lambda: T.SummarySaverHook(save_secs=-1, output_dir=_DIR), ValueError, 'save_secs=-1'),
    'SummarySaverHook summary_writer=1': (lambda: T.SummarySaverHook(save_steps=1, summary_writer=1), TypeError, 'got 1'),
    'SummarySaverHook summary_op=1': (lambda: T.SummarySaverHook(save_steps=1, output_dir=_DIR, summary_op=1), TypeError, 'summary_op 1 is not callable'),
    'SummarySaverHook output_dir=1': (lambda: T.SummarySaverHook(save_steps=1, output_dir=1), TypeError, 'SummarySaverHook output_dir=1'),
    'StepCounterHook both': (lambda: T.StepCounterHook(every_n_steps=1, every_n_secs=1), ValueError, 'exactly one of every_n_steps and every_n_secs'),
    "StepCounterHook every_n_steps='x'": (lambda: T.StepCounterHook(every_n_steps='x'), TypeError, "every_n_steps='x'"),
    'StepCounterHook every_n_steps=-1': (lambda: T.StepCounterHook(every_n_steps=-1), ValueError, 'every_n_steps=-1'),
}


@pytest.mark.parametrize('name', list(_CONSTRUCTORS))
def test_bad_constructor_arguments_fail_at_once_naming_the_value(name):
  T.get_or_create_global_step()
  previous = signal.getsignal(signal.SIGTERM)
  make, error, text = _CONSTRUCTORS[name]
  with pytest.raises(error, match=re.escape(text)):
    make()
  assert signal.getsignal(signal.SIGTERM) is previous  # nothing left installed


def _step(x=1.0):
  return {'y': tf.constant(2.0) * x}


_RUN_ARGUMENTS = {
    'feed_dict=[1]': (dict(fetches=_step, feed_dict=[1]), TypeError, 'feed_dict=[1] of type list'),
    "feed_dict={1: 2}": (dict(fetches=_step, feed_dict={1: 2}), TypeError, 'feed_dict key 1'),
    "feed_dict={'z': 1}": (dict(fetches=_step, feed_dict={'z': 1}), ValueError, "feed_dict key 'z' matches no parameter"),
    "fetches='nope'": (dict(fetches=[_step, 'nope']), ValueError, "Fetch name 'nope' names no tensor"),
    'fetches=object()': (dict(fetches=[object]), None, None),
    'options=5': (dict(fetches=_step, options=5), TypeError, 'options=5 of type int'),
    "run_metadata='x'": (dict(fetches=_step, run_metadata='x'), TypeError, "run_metadata='x' of type str"),
}


@pytest.mark.parametrize('name', [n for n, case in _RUN_ARGUMENTS.items() if case[1]])
def test_bad_run_arguments_fail_naming_the_value(name):
  T.get_or_create_global_step()
  kwargs, error, text = _RUN_ARGUMENTS[name]
  with T.MonitoredSession(graceful_stop_signals=None) as sess:
    with pytest.raises(error, match=re.escape(text)):
      sess.run(**kwargs)
    assert sess.run(_step)['y'] == 2.0  # the session is still usable


def test_a_fetch_of_an_unfetchable_object_names_it():
  with T.MonitoredSession(graceful_stop_signals=None) as sess:
    value = object()
    with pytest.raises(TypeError, match=re.escape(f'Fetch argument {value!r} has '
                                                   'invalid type object')):
      sess.run(value)


@pytest.mark.parametrize('returned, text', [
    ('hello', "'hello'"),
    (object, "<class 'object'>"),
    ({'a': b'x'.decode}, 'built-in method decode'),
])
def test_a_step_returning_non_tensor_values_fails_naming_them(returned, text):
  with T.MonitoredSession(graceful_stop_signals=None) as sess:
    with pytest.raises(TypeError, match=re.escape(text)):
      sess.run(lambda: returned)


def test_a_step_returning_python_numbers_and_none_gives_numpy_and_none():
  with T.MonitoredSession(graceful_stop_signals=None) as sess:
    assert sess.run(lambda: [None, 3]) == [None, 3]


class Boom(Exception):
  pass


_LIFECYCLE = ['begin', 'after_create_session', 'before_run', 'after_run', 'end']


class RaisingHook(T.SessionRunHook):
  """Raises Boom in `method`; records which methods ran."""

  def __init__(self, method):
    self.method, self.calls = method, []
    self.error = Boom(f'from {method}')

  def _call(self, name):
    self.calls.append(name)
    if name == self.method:
      raise self.error

  def begin(self):
    self._call('begin')

  def after_create_session(self, session, coord):
    self._call('after_create_session')

  def before_run(self, run_context):
    self._call('before_run')

  def after_run(self, run_context, run_values):
    self._call('after_run')

  def end(self, session):
    self._call('end')


@pytest.mark.parametrize('method', _LIFECYCLE)
def test_a_hook_raising_closes_the_session_and_the_error_reaches_the_caller(method):
  T.get_or_create_global_step()
  hook = RaisingHook(method)
  other = RaisingHook(None)
  previous = signal.getsignal(signal.SIGTERM)
  sessions = []
  with pytest.raises(Boom) as error:
    with T.MonitoredSession(hooks=[other, hook]) as sess:
      sessions.append(sess)
      sess.run(_step)
  assert error.value is hook.error  # unchanged: the very object raised
  if sessions:
    assert sessions[0].should_stop()  # closed
    with pytest.raises(RuntimeError, match='Run called on a closed session'):
      sessions[0].run(_step)
  if method == 'end':
    assert other.calls[-1] == 'end'  # end ran: no error was propagating
  else:
    assert 'end' not in other.calls and 'end' not in hook.calls
  assert signal.getsignal(signal.SIGTERM) is previous  # handlers restored
