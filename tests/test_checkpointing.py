"""Input-pipeline state in checkpoints, what cannot be checkpointed, and traced
checkpoint writes."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tfmon import checkpointing
from tests.training import Job, forget_global_step


class PipelineJob:
  """A step that pulls shuffled batches from a tf.data iterator and reports them."""

  def __init__(self):
    self.global_step = tfmon.train.get_or_create_global_step()
    dataset = tf.data.Dataset.range(64).shuffle(64, seed=7).batch(4).repeat()
    self.iterator = iter(dataset)
    self.total = tf.Variable(0, dtype=tf.int64)

  def step(self):
    batch = next(self.iterator)
    self.total.assign_add(tf.reduce_sum(batch))
    self.global_step.assign_add(1)
    return {'batch': batch}

  def train(self, last_step, checkpoint_dir=None):
    batches = []
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=checkpoint_dir,
        checkpoint={'total': self.total, 'iterator': self.iterator},
        save_checkpoint_steps=100, log_step_count_steps=None,
        save_summaries_steps=None,
        hooks=[tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
      while not sess.should_stop():
        batches.append(sess.run(self.step)['batch'])
    return batches


def test_a_resumed_run_continues_with_the_next_unseen_batch(tmp_path):
  uninterrupted = PipelineJob().train(25)  # crosses an epoch and its reshuffle
  forget_global_step()
  first_part = PipelineJob().train(10, checkpoint_dir=str(tmp_path))
  forget_global_step()
  resumed = PipelineJob()  # a fresh iterator, as in a new process
  second_part = resumed.train(25, checkpoint_dir=str(tmp_path))
  assert len(first_part) == 10 and len(second_part) == 15
  np.testing.assert_array_equal(np.stack(first_part + second_part),
                                np.stack(uninterrupted))
  assert resumed.total.numpy() == sum(int(b.sum()) for b in uninterrupted)


def test_distributed_iterators_are_refused_with_the_reason():
  strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
  iterator = iter(strategy.experimental_distribute_dataset(
      tf.data.Dataset.range(8).batch(2)))
  with pytest.raises(TypeError, match=r"checkpoint\['iterator'\] is a distributed "
                     'iterator, which TensorFlow cannot checkpoint'):
    tfmon.train.Scaffold(checkpoint={'iterator': iterator})


def test_python_iterators_are_refused():
  with pytest.raises(TypeError, match='a Python generator or iterator is not'):
    tfmon.train.Scaffold(checkpoint={'iterator': iter([1, 2, 3])})
  with pytest.raises(TypeError, match=r"^checkpoint\['nets'\]\['extra'\]\[1\] = 3 of "
                     'type int cannot be checkpointed'):
    tfmon.train.Scaffold(checkpoint={'nets': {'extra': [tf.Variable(1.0), 3]}})


def _nested_state(offset):
  """Variables in nested dicts and lists, as tf.train.Checkpoint takes them."""
  return {'nets': {'kernel': tf.Variable([1.0 + offset, 2.0]),
                   'extra': [tf.Variable(3.0 + offset),
                             {'deep': tf.Variable(4.0 + offset)}]},
          'scales': [tf.Variable(5.0 + offset)]}


def test_nested_dicts_and_lists_of_trackables_save_and_restore(tmp_path):
  state = _nested_state(0.0)
  variables = tf.nest.flatten(state)
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    for variable in variables:
      variable.assign_add(tf.ones_like(variable))
    global_step.assign_add(1)

  duties = dict(checkpoint_dir=str(tmp_path), save_checkpoint_steps=1,
                save_summaries_steps=None, log_step_count_steps=None)
  with tfmon.train.MonitoredTrainingSession(
      checkpoint=state, hooks=[tfmon.train.StopAtStepHook(last_step=4)],
      **duties) as sess:  # saves every step: written eagerly, then traced
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  names = {name for name, _ in tf.train.list_variables(str(tmp_path))}
  assert {'nets/kernel/.ATTRIBUTES/VARIABLE_VALUE',
          'nets/extra/1/deep/.ATTRIBUTES/VARIABLE_VALUE',
          'scales/0/.ATTRIBUTES/VARIABLE_VALUE'} <= names

  forget_global_step()
  tfmon.train.get_or_create_global_step()
  fresh = _nested_state(100.0)
  with tfmon.train.MonitoredTrainingSession(checkpoint=fresh, **duties) as sess:
    pass
  assert [v.numpy().tolist() for v in tf.nest.flatten(fresh)] == [
      v.numpy().tolist() for v in variables]
  assert fresh['nets']['kernel'].numpy().tolist() == [5.0, 6.0]  # 1, 2 + 4 steps


def _traced(checkpoint):
  """Whether `checkpoint`'s next write with an unchanged object graph is traced."""
  return bool(checkpoint._traced_writes._write)  # pylint: disable=protected-access


def _saved(path):
  """Every tensor `path` holds, as numpy."""
  reader = tf.train.load_checkpoint(path)
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}


class _RecordVariables(tfmon.train.CheckpointSaverListener):
  """Records `variables()` (numpy values) at each save."""

  def __init__(self, variables):
    self._variables = variables
    self.values = {}

  def before_save(self, session, global_step_value):
    self.values[global_step_value] = self._variables()


def test_traced_writes_save_the_values_of_their_moment_under_the_same_keys(tmp_path):
  job = Job()
  job.optimizer = keras.optimizers.Adam(0.05)  # builds its slots in the first step
  recorder = _RecordVariables(job.variables)
  scaffold = tfmon.train.Scaffold(checkpoint=job.checkpoint)
  saver = tfmon.train.CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=scaffold,
                                          listeners=[recorder])
  with tfmon.train.MonitoredSession(
      session_creator=tfmon.train.ChiefSessionCreator(scaffold=scaffold),
      hooks=[saver, tfmon.train.StopAtStepHook(last_step=4)]) as sess:
    while not sess.should_stop():
      sess.run(job.step)
  assert _traced(scaffold.checkpoint)
  # Step 0 has no optimizer slots; step 1's graph is new, written eagerly, and
  # step 2's, unchanged, is traced.
  assert sorted(recorder.values) == [0, 1, 2, 3, 4]
  eager = _saved(tmp_path / 'model.ckpt-1')
  for step in (2, 3, 4):
    traced = _saved(tmp_path / f'model.ckpt-{step}')
    assert sorted(traced) == sorted(eager)
    assert traced['_CHECKPOINTABLE_OBJECT_GRAPH'] == eager['_CHECKPOINTABLE_OBJECT_GRAPH']
    assert traced['global_step/.ATTRIBUTES/VARIABLE_VALUE'] == step
    assert traced['save_counter/.ATTRIBUTES/VARIABLE_VALUE'] == step + 1
    restored = Job(init_seed=1)
    restored.optimizer = keras.optimizers.Adam(0.05)
    restored.optimizer.build(restored.model.trainable_variables)
    checkpointing.restore(tf.train.Checkpoint(**restored.checkpoint),
                          str(tmp_path / f'model.ckpt-{step}'))
    for saved, value in zip(restored.variables(), recorder.values[step]):
      np.testing.assert_array_equal(saved, value)
  assert os.path.exists(tmp_path / 'model.ckpt-4.data-00000-of-00001')  # one shard


def test_a_changed_object_graph_is_written_eagerly_then_traced_again(tmp_path):
  module = tf.Module()
  module.v = tf.Variable(1.0)
  checkpoint, _ = checkpointing.as_checkpoint({'module': module})
  writer = checkpointing.CheckpointWriter(checkpoint, directory=str(tmp_path),
                                          max_to_keep=None)
  writer.save(0)
  writer.save(1)
  assert _traced(checkpoint)
  module.v.assign(2.0)
  writer.save(2)
  module.v = tf.Variable(3.0)  # the same name, another variable
  writer.save(3)
  assert not _traced(checkpoint)
  module.w = tf.Variable(4.0)  # a new variable
  writer.save(4)
  module.v.assign(5.0)
  writer.save(5)
  assert _traced(checkpoint)
  module.w.assign(6.0)
  writer.save(6)
  saved = {step: _saved(tmp_path / f'model.ckpt-{step}') for step in range(7)}
  v, w = 'module/v/.ATTRIBUTES/VARIABLE_VALUE', 'module/w/.ATTRIBUTES/VARIABLE_VALUE'
  assert [saved[step][v] for step in range(7)] == [1, 1, 2, 3, 3, 5, 5]
  assert [saved[step].get(w) for step in range(7)] == [None] * 4 + [4, 4, 6]


class _Counter(tf.train.experimental.PythonState):
  """Python state: what TensorFlow saves is computed in Python at each write."""

  def __init__(self):
    self.count = 0

  def serialize(self):
    return str(self.count)

  def deserialize(self, string_value):
    self.count = int(string_value)


def test_python_state_is_saved_as_it_is_at_each_write(tmp_path):
  counter = _Counter()
  checkpoint, _ = checkpointing.as_checkpoint({'counter': counter, 'v': tf.Variable(0)})
  writer = checkpointing.CheckpointWriter(checkpoint, directory=str(tmp_path))
  for step in range(4):
    counter.count = 10 * step
    writer.save(step)
  assert not _traced(checkpoint)
  for step in range(4):
    restored = _Counter()
    tf.train.Checkpoint(counter=restored).read(
        str(tmp_path / f'model.ckpt-{step}')).expect_partial()
    assert restored.count == 10 * step


_created = []  # what the TF1-style step's get_variable returned


def _tf1_style_job(checkpoint_dir, last_step, **kwargs):
  """A TF1-style step: its variables exist only once it is traced."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    weights = tf.compat.v1.get_variable(
        'conv1/weights', [3], initializer=tf.compat.v1.ones_initializer())
    _created.append(weights)
    weights.assign_add(tf.cast(tf.range(3), tf.float32))
    global_step.assign_add(1)
    return {'weights': tf.identity(weights)}

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(checkpoint_dir), save_checkpoint_steps=2,
      hooks=[tfmon.train.StopAtStepHook(last_step=last_step)], **kwargs) as sess:
    while not sess.should_stop():
      result = sess.run(step)
  return result['weights']


def test_the_default_checkpoint_holds_variables_a_step_creates_and_restores_them(
    tmp_path, caplog):
  _tf1_style_job(tmp_path, 3)
  saved = dict(tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path))))
  assert 'variables/conv1.Sweights/.ATTRIBUTES/VARIABLE_VALUE' in saved
  assert 'only the global step' not in caplog.text
  forget_global_step()
  # The variable lives on in this process: zero it, as a new process would
  # start it afresh; the resumed job must restore it.
  _created[-1].assign(tf.zeros([3]))
  resumed = _tf1_style_job(tmp_path, 5)
  np.testing.assert_array_equal(resumed, [1.0, 6.0, 11.0])  # 1 + 5 * range(3)


def test_a_checkpoint_missing_a_trained_variable_is_named_in_one_warning(
    tmp_path, caplog):
  other = tf.Variable(1.0, name='unrelated')
  _tf1_style_job(tmp_path, 3, checkpoint={'other': other})
  warnings = [r.getMessage() for r in caplog.records
              if 'does not hold' in r.getMessage()]
  assert len(warnings) == 1 and "['conv1/weights']" in warnings[0]


def test_with_jit_compile_the_default_checkpoint_still_holds_the_steps_variables(
    tmp_path):
  _tf1_style_job(tmp_path, 2, jit_compile=True)
  saved = dict(tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path))))
  assert 'variables/conv1.Sweights/.ATTRIBUTES/VARIABLE_VALUE' in saved


def test_a_tf1_checkpoint_without_a_trained_variable_lists_the_names_of_both_sides(
    tmp_path):
  written = tf.Variable(tf.ones([3]), name='conv1/weights')
  tf.compat.v1.train.Saver([written]).save(None, str(tmp_path / 'model.ckpt'),
                                           global_step=7)
  renamed = tf.Variable(tf.zeros([3]), name='conv1/kernel')
  tfmon.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=r"has no variables named \['conv1/kernel'\].*"
                     r"it holds \['conv1/weights'\]"):
    tfmon.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                         checkpoint={'kernel': renamed})


def _rmsprop_job(checkpoint_dir, last_step, weights):
  """A step with a v1 optimizer: its update op uses its slots without reading them."""
  global_step = tfmon.train.get_or_create_global_step()
  optimizer = tf.compat.v1.train.RMSPropOptimizer(0.1, momentum=0.9)

  def step():
    optimizer.minimize(lambda: tf.reduce_sum(weights * weights), var_list=[weights],
                       global_step=global_step)

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(checkpoint_dir), save_checkpoint_steps=2,
      hooks=[tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  return optimizer


def test_the_default_checkpoint_holds_a_v1_optimizers_slots_and_resumes_them(tmp_path):
  weights = tf.Variable([1.0, -2.0, 3.0], name='w')
  optimizer = _rmsprop_job(tmp_path, 3, weights)
  saved = dict(tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path))))
  slots = [optimizer.get_slot(weights, name) for name in optimizer.get_slot_names()]
  assert len(slots) == 2  # rms and momentum
  for slot in slots:
    key = 'variables/' + slot.name.split(':')[0].replace('/', '.S') + '/.ATTRIBUTES/VARIABLE_VALUE'
    assert key in saved, (key, sorted(saved))
  # A resumed job continues from the saved slots, not from fresh ones: the
  # same values as a job that never stopped.
  uninterrupted = tf.Variable([1.0, -2.0, 3.0], name='w')
  forget_global_step()
  _rmsprop_job(tmp_path / 'straight', 5, uninterrupted)
  forget_global_step()
  resumed = tf.Variable([7.0, 7.0, 7.0], name='w')  # a new process's variable
  _rmsprop_job(tmp_path, 5, resumed)
  np.testing.assert_allclose(resumed.numpy(), uninterrupted.numpy(), rtol=1e-6)


class _StopFlagHook(tfmon.train.SessionRunHook):
  """A hook with a variable of its own that it only fetches, as Estimator's
  early-stopping hooks keep their stop signal: set once the global step
  reaches 3, and read at every run."""

  def begin(self):
    self.flag = tf.Variable(False, trainable=False, name='signal_early_stopping')

  def before_run(self, run_context):
    return tfmon.train.SessionRunArgs(self.flag)

  def after_run(self, run_context, run_values):
    if run_values.results:
      run_context.request_stop()
    elif tfmon.train.get_global_step().numpy() >= 3:
      self.flag.assign(True)


def test_a_variable_hooks_only_fetch_is_saved_so_an_early_stop_survives_a_restart(tmp_path):
  def job():
    global_step = tfmon.train.get_or_create_global_step()
    weights = tf.Variable(1.0, name='w')

    def step():
      weights.assign_add(1.0)
      global_step.assign_add(1)

    runs = 0
    with tfmon.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), hooks=[_StopFlagHook()],
        save_checkpoint_steps=1, save_summaries_steps=None) as session:
      while not session.should_stop():
        session.run(step)
        runs += 1
    return runs

  assert job() == 4  # the flag is set after step 3, and read in run 4
  assert 'variables/signal_early_stopping/.ATTRIBUTES/VARIABLE_VALUE' in dict(
      tf.train.list_variables(str(tmp_path)))
  tf.compat.v1.get_default_graph().clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)
  assert job() == 1  # restored set: the first run stops the job, as in TF1
