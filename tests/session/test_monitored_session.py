"""MonitoredSession's lifecycle, stopping, closing and data running out."""

import threading

import pytest
import tensorflow as tf

import tfmon
from tests.training import Job, forget_global_step


class RecordingHook(tfmon.train.SessionRunHook):
  """Records every call the session makes on it."""

  def __init__(self, log, name='hook'):
    self.log = log
    self.name = name

  def begin(self):
    self.log.append((self.name, 'begin'))

  def after_create_session(self, session, coord):
    self.log.append((self.name, 'after_create_session'))
    self.session, self.coord = session, coord

  def before_run(self, run_context):
    self.log.append((self.name, 'before_run'))

  def after_run(self, run_context, run_values):
    self.log.append((self.name, 'after_run'))

  def end(self, session):
    self.log.append((self.name, 'end'))


def test_lifecycle_calls_hooks_in_v1_order():
  log = []
  hooks = [RecordingHook(log, 'a'), RecordingHook(log, 'b')]
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    assert log == [('a', 'begin'), ('b', 'begin'), ('a', 'after_create_session'),
                   ('b', 'after_create_session')]
    assert isinstance(hooks[0].coord, tf.train.Coordinator)
    assert hooks[0].session.run(lambda: tf.constant(2.0)) == 2.0
    del log[:]
    assert sess.run(lambda: tf.constant(1.0)) == 1.0
    assert log == [('a', 'before_run'), ('b', 'before_run'), ('a', 'after_run'),
                   ('b', 'after_run')]
    del log[:]
  assert log == [('a', 'end'), ('b', 'end')]


def test_request_stop_in_after_run_makes_should_stop_true():
  class StopAfterThree(tfmon.train.SessionRunHook):

    def begin(self):
      self.runs = 0

    def after_run(self, run_context, run_values):
      self.runs += 1
      if self.runs == 3:
        run_context.request_stop()

  hook = StopAfterThree()
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    while not sess.should_stop():
      sess.run(lambda: tf.constant(0))
    with pytest.raises(RuntimeError,
                       match='^Run called even after should_stop requested.$'):
      sess.run(lambda: tf.constant(0))
  assert hook.runs == 3


def test_closing_twice_raises_v1_error():
  sess = tfmon.train.MonitoredSession()
  sess.close()
  assert sess.should_stop()
  with pytest.raises(RuntimeError, match='^Session is already closed.$'):
    sess.close()


def test_end_is_not_called_when_an_exception_propagates():
  log = []
  with pytest.raises(ValueError, match='boom'):
    with tfmon.train.MonitoredSession(hooks=[RecordingHook(log)]) as sess:
      sess.run(lambda: tf.constant(1))
      raise ValueError('boom')
  assert ('hook', 'end') not in log
  assert sess.should_stop()  # closed, not half-open


def test_data_running_out_ends_the_with_block_cleanly():
  log = []
  iterator = iter(tf.data.Dataset.range(5))
  total = tf.Variable(0, dtype=tf.int64)

  def step():
    total.assign_add(next(iterator))

  runs = 0
  with tfmon.train.MonitoredSession(hooks=[RecordingHook(log)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
      runs += 1
  assert runs == 5
  assert total.numpy() == 0 + 1 + 2 + 3 + 4
  assert log[-1] == ('hook', 'end')


def test_stop_iteration_ends_the_with_block_cleanly():
  with tfmon.train.MonitoredSession() as sess:
    raise StopIteration
  assert sess.should_stop()


def test_coordinator_threads_are_joined_on_close_and_their_errors_raised():
  class ThreadHook(tfmon.train.SessionRunHook):

    def after_create_session(self, session, coord):
      self.stopped = threading.Event()

      def worker():
        coord.wait_for_stop()
        self.stopped.set()

      thread = threading.Thread(target=worker)
      coord.register_thread(thread)
      thread.start()
      self.coord = coord

  hook = ThreadHook()
  with tfmon.train.MonitoredSession(hooks=[hook]):
    pass
  assert hook.stopped.is_set()

  with pytest.raises(OSError, match='disk gone'):
    with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
      try:
        raise OSError('disk gone')
      except OSError:
        hook.coord.request_stop(ex=OSError('disk gone'))
      sess.should_stop()


def test_hooks_of_the_wrong_type_fail_at_construction():
  with pytest.raises(TypeError, match=r'hooks\[1\] is 3 of type int, not a '
                     'SessionRunHook'):
    tfmon.train.MonitoredSession(hooks=[tfmon.train.SessionRunHook(), 3])
  with pytest.raises(TypeError, match='got the single hook'):
    tfmon.train.MonitoredSession(hooks=tfmon.train.SessionRunHook())
  with pytest.raises(TypeError, match='session_creator must be a SessionCreator'):
    tfmon.train.MonitoredSession(session_creator='local')


def test_hook_returning_something_else_than_session_run_args():
  class Confused(tfmon.train.SessionRunHook):

    def before_run(self, run_context):
      return ['loss']

  with tfmon.train.MonitoredSession(hooks=[Confused()]) as sess:
    with pytest.raises(TypeError, match=r"Confused.before_run returned \['loss'\]; "
                       'it must return a SessionRunArgs or None'):
      sess.run(lambda: tf.constant(1))


def test_run_after_close_says_the_session_is_closed():
  sess = tfmon.train.MonitoredSession()
  sess.close()
  with pytest.raises(RuntimeError, match='closed session'):
    sess.run(lambda: tf.constant(1))


def test_a_hooked_run_inside_tf_function_is_refused():
  tfmon.train.get_or_create_global_step()
  hook = tfmon.train.StopAtStepHook(last_step=5)  # the session tracks the global step
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:

    @tf.function
    def nested():
      return sess.run(lambda: tf.constant(1.0))

    with pytest.raises(RuntimeError, match='A tfmon session runs eagerly: call run'):
      nested()
    assert sess.run(lambda: tf.constant(1.0)) == 1.0


def test_singular_monitored_session_restores_as_v1(tmp_path):
  job = Job()
  job.train(4, checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
            save_summaries_steps=None, log_step_count_steps=None)
  steps = {}
  for name, kwargs in [
      ('latest', dict(checkpoint_dir=str(tmp_path))),
      ('given', dict(checkpoint_filename_with_path=str(tmp_path / 'model.ckpt-2')))]:
    forget_global_step()
    resumed = Job(init_seed=1)
    with tfmon.train.SingularMonitoredSession(
        scaffold=tfmon.train.Scaffold(checkpoint=resumed.checkpoint), **kwargs):
      steps[name] = int(resumed.global_step.numpy())
  assert steps == {'latest': 4, 'given': 2}
