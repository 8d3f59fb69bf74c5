"""CheckpointSaverHook: when it saves, what it writes, and resuming from it."""

import logging
import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests.training import Job, forget_global_step


def _checkpoint_steps(directory):
  state = tf.train.get_checkpoint_state(directory)
  return [int(path.rsplit('-', 1)[-1]) for path in state.all_model_checkpoint_paths]


def test_saves_at_creation_on_its_timer_and_at_end(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  Job().train(25, checkpoint_dir=str(tmp_path), save_checkpoint_steps=10,
              save_summaries_steps=None, log_step_count_steps=None, max_to_keep=None)
  assert _checkpoint_steps(tmp_path) == [0, 10, 20, 25]
  assert tf.train.latest_checkpoint(tmp_path) == os.path.join(tmp_path, 'model.ckpt-25')
  for step in (0, 10, 20, 25):
    assert os.path.exists(tmp_path / f'model.ckpt-{step}.index')
    assert os.path.exists(tmp_path / f'model.ckpt-{step}.data-00000-of-00001')
  assert f'Saving checkpoints for 10 into {tmp_path}/model.ckpt.' in caplog.text


def test_max_to_keep_deletes_older_checkpoints(tmp_path):
  Job().train(40, checkpoint_dir=str(tmp_path), save_checkpoint_steps=10,
              save_summaries_steps=None, log_step_count_steps=None, max_to_keep=2)
  assert _checkpoint_steps(tmp_path) == [30, 40]
  assert not os.path.exists(tmp_path / 'model.ckpt-10.index')


def _saved_values(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if name != '_CHECKPOINTABLE_OBJECT_GRAPH'}


def _holds(saved, value):
  """Whether a checkpoint's values include `value` (Keras 3 saves a model
  variable once, under its shortest path, often the optimizer's: by value)."""
  return any(s.shape == value.shape and np.array_equal(s, value)
             for s in saved.values())


def test_checkpoint_holds_model_optimizer_and_global_step(tmp_path):
  job = Job()
  job.train(5, checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
            save_summaries_steps=None, log_step_count_steps=None)
  saved = _saved_values(tmp_path / 'model.ckpt-5')
  assert saved['global_step/.ATTRIBUTES/VARIABLE_VALUE'] == 5
  for variable in job.model.variables + job.optimizer.variables:
    assert _holds(saved, variable.numpy()), variable.path


class _VariablesAtCreation(tfmon.train.SessionRunHook):

  def __init__(self, job):
    self._job = job

  def after_create_session(self, session, coord):
    self.step = int(self._job.global_step.numpy())
    self.variables = self._job.variables()


def _assert_all_equal(actual, expected):
  assert len(actual) == len(expected)
  for i, (a, e) in enumerate(zip(actual, expected)):
    np.testing.assert_array_equal(a, e, err_msg=f'variable {i}')


def test_resumed_run_matches_an_uninterrupted_one(tmp_path):
  no_summaries = dict(save_summaries_steps=None, log_step_count_steps=None)
  uninterrupted = Job()
  uninterrupted.train(60, **no_summaries)

  forget_global_step()
  first = Job()
  first.train(30, checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
              **no_summaries)
  assert _checkpoint_steps(tmp_path) == [0, 30]

  forget_global_step()
  resumed = Job(init_seed=1)  # other initial values: all of them must come from disk
  at_creation = _VariablesAtCreation(resumed)
  resumed.train(60, checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
                hooks=[at_creation], **no_summaries)
  assert at_creation.step == 30
  _assert_all_equal(at_creation.variables, first.variables())
  assert resumed.global_step.numpy() == 60
  _assert_all_equal(resumed.variables(), uninterrupted.variables())


def test_restore_logs_the_path_and_rerunning_a_finished_job_does_nothing(
    tmp_path, caplog):
  Job().train(10, checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
              save_summaries_steps=None, log_step_count_steps=None)
  forget_global_step()
  caplog.set_level(logging.INFO)
  caplog.clear()  # only the rerun's lines, whatever level earlier tests left
  losses = Job().train(10, checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                       save_summaries_steps=None, log_step_count_steps=None)
  assert losses == []
  assert f'Restoring parameters from {tmp_path}/model.ckpt-10' in caplog.text
  assert 'Saving checkpoints' not in caplog.text  # step 10 is already on disk
  assert _checkpoint_steps(tmp_path) == [0, 5, 10]


class _SeesCreationCheckpoint(tfmon.train.SessionRunHook):

  def __init__(self, directory):
    self._directory = directory

  def after_create_session(self, session, coord):
    self.saw = os.path.exists(os.path.join(self._directory, 'model.ckpt-0.index'))


def test_with_checkpoint_given_the_creation_checkpoint_is_saved_between_chief_and_user_hooks(
    tmp_path):
  # TF1's order: chief-only hooks' after_create_session, the save, then hooks'.
  chief_only, user = (_SeesCreationCheckpoint(str(tmp_path)) for _ in range(2))
  job = Job()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint=job.checkpoint,
      chief_only_hooks=[chief_only], hooks=[user], save_checkpoint_steps=100,
      save_summaries_steps=None, log_step_count_steps=None):
    pass  # no step runs
  assert (chief_only.saw, user.saw) == (False, True)
  saved = _saved_values(tmp_path / 'model.ckpt-0')
  for variable in job.model.variables:
    assert _holds(saved, variable.numpy()), variable.path


def test_the_creation_checkpoint_holds_a_tf1_style_steps_variables_as_they_start(
    tmp_path):
  # TF1 built every variable before its session, so model.ckpt-0 held them
  # all; this step creates its variable in its first trace.
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    # A name of its own: get_variable returns a variable of the same name that
    # another test made, as TF1 in one graph would.
    weights = tf.compat.v1.get_variable(
        'local3/weights', [3], initializer=tf.compat.v1.ones_initializer())
    weights.assign_add([1.0, 2.0, 3.0])
    global_step.assign_add(1)
    return {'weights': tf.identity(weights)}

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
      save_summaries_steps=None, log_step_count_steps=None,
      hooks=[tfmon.train.StopAtStepHook(last_step=2)]) as sess:
    while not sess.should_stop():
      sess.run(step)
  saved = _saved_values(tmp_path / 'model.ckpt-0')
  assert saved['global_step/.ATTRIBUTES/VARIABLE_VALUE'] == 0
  # The values the first step started from, not those it wrote.
  np.testing.assert_array_equal(
      saved['variables/local3.Sweights/.ATTRIBUTES/VARIABLE_VALUE'], [1.0, 1.0, 1.0])
  assert _checkpoint_steps(tmp_path) == [0, 2]


def test_the_creation_checkpoint_holds_optimizer_slots_made_in_the_first_trace(
    tmp_path):
  job = Job()
  job.optimizer = keras.optimizers.Adam(0.05)  # not built: the first trace makes its slots
  initial = [v.numpy() for v in job.model.variables]
  job.train(1, checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
            save_summaries_steps=None, log_step_count_steps=None)
  saved = _saved_values(tmp_path / 'model.ckpt-0')
  slots = [v for v in job.optimizer.variables if 'iteration' not in v.path and
           'learning_rate' not in v.path]
  assert len(slots) == 2 * len(job.model.trainable_variables)
  # global step, save counter, the optimizer's step count and learning rate,
  # the model's variables and the slots, each once, as they were before step 1.
  assert len(saved) == 4 + len(initial) + len(slots)
  assert saved['optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE'] == 0
  for value in initial + [np.zeros(v.shape) for v in slots]:
    assert _holds(saved, value)


def test_a_session_that_runs_no_step_writes_its_creation_checkpoint_when_closed(
    tmp_path):
  job = Job()
  listener = RecordingListener()
  hook = tfmon.train.CheckpointSaverHook(
      str(tmp_path), save_steps=3, saver=job.checkpoint, listeners=[listener])
  with tfmon.train.MonitoredSession(hooks=[hook]):
    pass
  assert _checkpoint_steps(tmp_path) == [0]
  assert listener.calls == ['begin', ('before_save', 0), ('after_save', 0),
                            ('end', 0)]


class RecordingListener(tfmon.train.CheckpointSaverListener):

  def __init__(self, stop_after_step=None):
    self.calls = []
    self._stop_after_step = stop_after_step

  def begin(self):
    self.calls.append('begin')

  def before_save(self, session, global_step_value):
    self.calls.append(('before_save', global_step_value))

  def after_save(self, session, global_step_value):
    self.calls.append(('after_save', global_step_value))
    return global_step_value == self._stop_after_step

  def end(self, session, global_step_value):
    self.calls.append(('end', global_step_value))


def test_listeners_see_every_save_and_can_stop_training(tmp_path):
  job = Job()
  listener = RecordingListener(stop_after_step=6)
  hook = tfmon.train.CheckpointSaverHook(
      str(tmp_path), save_steps=3, saver=job.checkpoint, listeners=[listener])
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step))
  assert job.global_step.numpy() == 6
  assert listener.calls == [
      'begin', ('before_save', 0), ('after_save', 0), ('before_save', 3),
      ('after_save', 3), ('before_save', 6), ('after_save', 6), ('end', 6)]


def test_a_checkpoint_manager_keeps_its_own_directory_and_name(tmp_path):
  job = Job()
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=job.model), str(tmp_path / 'own'), max_to_keep=3,
      checkpoint_name='weights')
  job_hook = tfmon.train.CheckpointSaverHook(str(tmp_path / 'ignored'), save_steps=2,
                                             saver=manager)
  with tfmon.train.MonitoredSession(
      hooks=[job_hook, tfmon.train.StopAtStepHook(last_step=4)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(job.step))
  assert tf.train.latest_checkpoint(tmp_path / 'own') == str(tmp_path / 'own/weights-4')
  assert not os.path.exists(tmp_path / 'ignored')


def test_a_failed_save_keeps_the_previous_checkpoint_and_says_what_failed(tmp_path):
  # A directory where the step-20 index file must go makes that write fail
  # after the step's data file was written.
  os.makedirs(tmp_path / 'model.ckpt-20.index')
  job = Job()
  with pytest.raises(RuntimeError, match=r'Saving checkpoint for step 20 into .*'
                     r'model.ckpt-20 failed: .*Is a directory.*the latest checkpoint '
                     r'is still .*model.ckpt-10'):
    job.train(30, checkpoint_dir=str(tmp_path), save_checkpoint_steps=10,
              save_summaries_steps=None, log_step_count_steps=None)
  assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / 'model.ckpt-10')
  assert not os.path.exists(tmp_path / 'model.ckpt-20.data-00000-of-00001')
  assert not os.path.exists(tmp_path / 'model.ckpt-20_temp')
  forget_global_step()
  restored = Job(init_seed=1)
  tfmon.train.ChiefSessionCreator(
      scaffold=tfmon.train.Scaffold(checkpoint=restored.checkpoint),
      checkpoint_dir=str(tmp_path)).create_session()
  assert restored.global_step.numpy() == 10


def test_without_a_saver_every_variable_the_step_uses_is_saved(tmp_path, caplog):
  # v1's hook saved all global variables through its default Saver.
  job = Job()
  hook = tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1)
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    sess.run(tfmon.train.op(job.step))
  assert 'only the global step' not in caplog.text
  names = tf.train.load_checkpoint(str(tmp_path)).get_variable_to_shape_map()
  assert 'global_step/.ATTRIBUTES/VARIABLE_VALUE' in names
  for variable in job.model.trainable_variables:
    key = 'variables/' + variable.path.replace('/', '.S') + '/.ATTRIBUTES/VARIABLE_VALUE'
    assert key in names, key


def test_an_empty_saver_saves_only_the_global_step_with_a_warning(tmp_path, caplog):
  job = Job()
  hook = tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver={})
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    sess.run(tfmon.train.op(job.step))
  assert 'Checkpoints will hold only the global step' in caplog.text
  assert "checkpoint={'model': model, 'optimizer': optimizer}" in caplog.text


def test_bad_arguments_fail_at_construction(tmp_path):
  tfmon.train.get_or_create_global_step()
  with pytest.raises(ValueError, match='^You cannot provide both saver and scaffold.$'):
    tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver={},
                                    scaffold=tfmon.train.Scaffold())
  with pytest.raises(ValueError, match='^Can not provide both every_secs and '
                     'every_steps.$'):
    tfmon.train.CheckpointSaverHook(str(tmp_path), save_secs=1, save_steps=1)
  with pytest.raises(ValueError, match='^Either every_secs or every_steps should be '
                     'provided.$'):
    tfmon.train.CheckpointSaverHook(str(tmp_path))
  with pytest.raises(TypeError, match=r"saver\['model'\] = 3 of type int cannot be "
                     'checkpointed'):
    tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver={'model': 3})
  with pytest.raises(TypeError, match="saver='model' of type str cannot be "
                     'checkpointed'):
    tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver='model')


def test_a_checkpoint_that_does_not_fit_the_model_is_refused(tmp_path):
  Job().train(2, checkpoint_dir=str(tmp_path), save_checkpoint_steps=1,
              save_summaries_steps=None, log_step_count_steps=None)
  forget_global_step()
  other = tf.Variable(tf.zeros([7]))
  scaffold = tfmon.train.Scaffold(checkpoint={'model': tf.Module(), 'x': other})
  tfmon.train.get_or_create_global_step()
  with pytest.raises(ValueError, match='does not fit what this session restores'):
    tfmon.train.ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=str(tmp_path)).create_session()


def test_keep_checkpoint_every_n_hours_keeps_files_past_max_to_keep(tmp_path):
  Job().train(6, checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
              save_summaries_steps=None, log_step_count_steps=None, max_to_keep=1,
              keep_checkpoint_every_n_hours=1e-9)  # every checkpoint is "hours" old
  assert _checkpoint_steps(tmp_path) == [6]
  for step in (0, 2, 4, 6):
    assert os.path.exists(tmp_path / f'model.ckpt-{step}.index')


def test_a_tf_train_checkpoint_gets_the_global_step_added(tmp_path):
  job = Job()
  checkpoint = tf.train.Checkpoint(model=job.model)
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), checkpoint=checkpoint, save_checkpoint_steps=1,
      log_step_count_steps=None, save_summaries_steps=None) as sess:
    sess.run(tfmon.train.op(job.step))
  reader = tf.train.load_checkpoint(str(tmp_path))
  assert reader.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == 1
  assert checkpoint.global_step is job.global_step


_KILLABLE_JOB = """
import sys
from tests.training import Job
import tfmon

class PrintSteps(tfmon.train.SessionRunHook):  # after CheckpointSaverHook's after_run
  def after_run(self, run_context, run_values):
    print(tfmon.train.global_step_after_run(run_context, job.global_step), flush=True)

job = Job()
job.train(int(sys.argv[1]), checkpoint_dir=sys.argv[2], save_checkpoint_steps=1,
          save_summaries_steps=None, log_step_count_steps=None, hooks=[PrintSteps()])
"""


def _kill_after_saves(checkpoint_dir, last_step, saves, delay_secs):
  """Runs the job in a process and SIGKILLs it `delay_secs` after its `saves`th
  run (it saves every step, so the kill usually lands inside a save)."""
  process = subprocess.Popen(
      [sys.executable, '-c', _KILLABLE_JOB, str(last_step), str(checkpoint_dir)],
      cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    for _ in range(saves):
      assert process.stdout.readline(), 'the job ended before it was killed'
    time.sleep(delay_secs)
  finally:
    process.kill()
    process.wait(timeout=60)
    process.stdout.close()


@pytest.mark.slow
def test_a_job_killed_while_saving_resumes_as_if_never_killed(tmp_path):
  uninterrupted = Job()
  uninterrupted.train(80, save_summaries_steps=None, log_step_count_steps=None)

  _kill_after_saves(tmp_path, 80, saves=10, delay_secs=0.013)
  first_kill = _checkpoint_steps(tmp_path)[-1]
  _kill_after_saves(tmp_path, 80, saves=10, delay_secs=0.031)  # resumes, then killed
  assert _checkpoint_steps(tmp_path)[-1] > first_kill

  forget_global_step()
  resumed = Job(init_seed=1)  # other initial values: all of them must come from disk
  resumed.train(80, checkpoint_dir=str(tmp_path), save_checkpoint_steps=1,
                save_summaries_steps=None, log_step_count_steps=None)
  assert resumed.global_step.numpy() == 80
  _assert_all_equal(resumed.variables(), uninterrupted.variables())



def test_a_subclass_finds_tfs_steps_per_run_and_saves_as_on_tfs_class(tmp_path):
  # TF's hook reads the step a run left whenever its timer may trigger
  # (`_steps_per_run` so high, unless set: TPUEstimator sets it).
  def subclass(base):
    class StepsPerRunSeen(base):
      def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps_per_run_given = self._steps_per_run
        self._set_steps_per_run(self._steps_per_run)
    return StepsPerRunSeen

  def run(graph, session, hook_class, directory):
    with graph.as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      tf.compat.v1.get_variable('w', [2])
      train_op = tf.compat.v1.assign_add(global_step, 1).op
      hook = subclass(hook_class)(str(directory), save_steps=10)
      with session(hooks=[hook]) as sess:
        for _ in range(25):
          sess.run(train_op)
    return hook

  tf1_hook = run(tf.Graph(), tf.compat.v1.train.MonitoredSession,
                 tf.compat.v1.train.CheckpointSaverHook, tmp_path / 'tf1')
  hook = run(tfmon.Graph(), tfmon.train.MonitoredSession,
             tfmon.train.CheckpointSaverHook, tmp_path / 'tfmon')
  assert hook.steps_per_run_given == tf1_hook.steps_per_run_given == 1000000
  assert _checkpoint_steps(tmp_path / 'tf1') == [0, 10, 20, 25]
  assert _checkpoint_steps(tmp_path / 'tfmon') == _checkpoint_steps(tmp_path / 'tf1')
