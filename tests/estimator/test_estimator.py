"""tfmon.estimator: a TF1 model_fn trained, evaluated and used for prediction."""

import gc
import inspect
import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorboard.backend.event_processing import event_accumulator

import tfmon
from tfmon import estimator


def _data(seed=0, n=64):
  rng = np.random.default_rng(seed)
  centers = rng.normal(scale=3.0, size=(3, 4)).astype(np.float32)
  labels = rng.integers(0, 3, size=n).astype(np.int64)
  return centers[labels] + rng.normal(size=(n, 4)).astype(np.float32), labels


def model_fn(features, labels, mode, params):
  """TF1 Estimator code, as TensorFlow's tutorials wrote it."""
  weights = tf.compat.v1.get_variable('dense/kernel', [4, 3])
  bias = tf.compat.v1.get_variable('dense/bias', [3],
                                   initializer=tf.compat.v1.zeros_initializer())
  logits = tf.matmul(features, weights) + bias
  predictions = {'classes': tf.argmax(logits, 1),
                 'probabilities': tf.nn.softmax(logits, name='softmax_tensor')}
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode=mode, predictions=predictions)
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == estimator.ModeKeys.TRAIN:
    train_op = tf.compat.v1.train.GradientDescentOptimizer(params['rate']).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
  return estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops={
      'accuracy': tf.compat.v1.metrics.accuracy(labels, predictions['classes'])})


def _train_input():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)


def _eval_input():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices((features, labels)).batch(16)  # 4 batches


def test_train_evaluate_predict_and_resume(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  model = estimator.Estimator(
      model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(save_checkpoints_steps=10, log_step_count_steps=10))
  model.train(_train_input, steps=20)
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      'model.ckpt-0', 'model.ckpt-10', 'model.ckpt-20']
  assert 'loss = ' in caplog.text and 'step = 10' in caplog.text
  graph_def = text_format.Parse((tmp_path / 'graph.pbtxt').read_text(), tf.compat.v1.GraphDef())
  assert 'dense/kernel' in {node.name for node in graph_def.node}  # TF1's graph file
  assert {'dense/kernel', 'dense/bias', 'global_step'} <= set(model.get_variable_names())

  results = model.evaluate(_eval_input)
  assert results['global_step'] == 20
  assert 0.5 < results['accuracy'] <= 1.0 and results['loss'] > 0
  assert 'Saving dict for global step 20: accuracy = ' in caplog.text
  accumulator = event_accumulator.EventAccumulator(str(tmp_path / 'eval'))
  accumulator.Reload()
  assert [e.step for e in accumulator.Scalars('accuracy')] == [20]  # simple_value
  assert tfmon.train.read_eval_metrics(str(tmp_path / 'eval'))[20]['accuracy'] == (
      pytest.approx(results['accuracy']))

  predictions = list(model.predict(lambda: tf.data.Dataset.from_tensor_slices(
      _data()[0][:10]).batch(4)))
  assert len(predictions) == 10 and set(predictions[0]) == {'classes', 'probabilities'}
  assert predictions[0]['probabilities'].shape == (3,)

  model.train(_train_input, steps=5)  # resumes from model.ckpt-20
  assert model.latest_checkpoint().endswith('model.ckpt-25')
  np.testing.assert_array_equal(model.get_variable_value('dense/bias').shape, [3])


def test_model_fn_may_take_any_subset_of_its_arguments(tmp_path):
  def small_model_fn(features, mode):
    weights = tf.compat.v1.get_variable('w', [4, 1])
    prediction = tf.matmul(features, weights)
    loss = tf.reduce_mean(tf.square(prediction - 1.0))
    return estimator.EstimatorSpec(
        mode=mode, loss=loss, predictions=prediction,
        train_op=tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))

  model = estimator.Estimator(small_model_fn, model_dir=str(tmp_path))
  model.train(lambda: tf.data.Dataset.from_tensors(_data()[0]).repeat(), max_steps=3)
  assert model.latest_checkpoint().endswith('model.ckpt-3')
  model.train(lambda: tf.data.Dataset.from_tensors(_data()[0]).repeat(), max_steps=3)
  assert model.latest_checkpoint().endswith('model.ckpt-3')  # nothing more to do


def test_misuse_fails_early_naming_the_fix(tmp_path):
  with pytest.raises(TypeError, match=r"model_fn has arguments \['inputs'\]"):
    estimator.Estimator(lambda inputs, mode: None)
  with pytest.raises(ValueError, match='train_distribute=.*tfmon.estimator runs a '
                     'model_fn under tf.distribute.MirroredStrategy'):
    estimator.RunConfig(train_distribute=tf.distribute.experimental.CentralStorageStrategy(
        ['/cpu:0']))
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  with pytest.raises(ValueError, match='Can not provide both steps and max_steps.'):
    model.train(_train_input, steps=1, max_steps=1)
  with pytest.raises(ValueError, match='Missing train_op.'):
    estimator.EstimatorSpec(mode=estimator.ModeKeys.TRAIN, loss=tf.constant(1.0))


def test_train_and_evaluate_evaluates_after_checkpoints_and_at_the_end(tmp_path):
  model = estimator.Estimator(
      model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(save_checkpoints_steps=10))
  results, exports = estimator.train_and_evaluate(
      model, estimator.TrainSpec(_train_input, max_steps=25),
      estimator.EvalSpec(_eval_input, steps=2, throttle_secs=0))
  assert exports == [] and results['global_step'] == 25
  # After the checkpoints at 10 and 20 (not the one at creation), and at the end.
  assert sorted(tfmon.train.read_eval_metrics(model.eval_dir())) == [10, 20, 25]


def test_early_stopping_hooks_read_the_estimators_evaluations(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  model.train(_train_input, steps=5)
  model.evaluate(_eval_input)
  stop = estimator.experimental.stop_if_higher_hook(
      model, 'accuracy', 0.0, run_every_secs=None, run_every_steps=1)
  model.train(_train_input, steps=50, hooks=[stop])
  assert model.latest_checkpoint().endswith('model.ckpt-6')  # stopped after one step


def test_a_model_dir_written_by_tf1_continues_training_and_evaluates(tmp_path):
  # What TF <= 2.15's Estimator left: a TF1 Saver's name-based checkpoint of
  # the same model_fn's graph, at step 7.
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        _train_input()).get_next()
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, estimator.ModeKeys.TRAIN, {'rate': 0.1})
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for _ in range(7):
        session.run(spec.train_op)
      trained_bias = session.run(tf.compat.v1.get_default_graph().get_tensor_by_name(
          'dense/bias/Read/ReadVariableOp:0'))
      tf.compat.v1.train.Saver().save(session, str(tmp_path / 'model.ckpt'),
                                      global_step=7)
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  assert model.get_variable_names() == ['dense/bias', 'dense/kernel', 'global_step']
  np.testing.assert_allclose(model.get_variable_value('dense/bias'), trained_bias)
  assert model.evaluate(_eval_input)['global_step'] == 7
  model.train(_train_input, steps=3)
  assert model.latest_checkpoint().endswith('model.ckpt-10')


def test_what_is_not_provided_says_what_to_use_instead():
  with pytest.raises(AttributeError, match='no BoostedTreesClassifier: not provided '
                     r'.*TensorFlow Decision Forests'):
    estimator.BoostedTreesClassifier  # pylint: disable=pointless-statement
  with pytest.raises(AttributeError, match='no TPUEstimator: it is '
                     'tfmon.estimator.tpu.TPUEstimator'):
    estimator.TPUEstimator  # pylint: disable=pointless-statement


class _Recording(tf.compat.v1.train.SessionRunHook):

  def __init__(self, name, calls):
    self._name, self._calls = name, calls

  def begin(self):
    self._calls.append(self._name)


class _RecordingListener(tf.compat.v1.train.CheckpointSaverListener):

  def __init__(self, calls):
    self._calls = calls

  def begin(self):
    self._calls.append('listener')

  def after_save(self, session, global_step_value):
    self._calls.append(('saved', int(global_step_value)))


def test_hooks_run_in_tf1s_order_and_the_loss_is_summarized(tmp_path):
  calls = []

  def model_fn_with_hooks(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    return spec._replace(training_hooks=(_Recording('training_hooks', calls),),
                         training_chief_hooks=(_Recording('training_chief_hooks', calls),))

  model = estimator.Estimator(
      model_fn_with_hooks, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(save_checkpoints_steps=3, save_summary_steps=2))
  model.train(_train_input, steps=4, hooks=[_Recording('hooks', calls)],
              saving_listeners=[_RecordingListener(calls)])
  # TF1: the chief's (Estimator's saver, with the listeners, then the spec's),
  # then the call's hooks, then the spec's training_hooks.
  assert calls == ['listener', 'training_chief_hooks', 'hooks', 'training_hooks',
                   ('saved', 0), ('saved', 3), ('saved', 4)]
  accumulator = event_accumulator.EventAccumulator(str(tmp_path))
  accumulator.Reload()
  assert [e.step for e in accumulator.Scalars('loss')] == [1, 3]


def test_saving_listeners_without_a_saver_are_refused_with_the_fix(tmp_path):
  model = estimator.Estimator(
      model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None))
  with pytest.raises(ValueError, match='There should be a CheckpointSaverHook to use '
                     'saving_listeners.*save_checkpoints_steps'):
    model.train(_train_input, steps=1, saving_listeners=[_RecordingListener([])])


def test_evaluating_a_checkpoint_with_optimizer_slots_warns_of_nothing(tmp_path, caplog):
  def adam_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if mode != estimator.ModeKeys.TRAIN:
      return spec
    train_op = tf.compat.v1.train.AdamOptimizer(0.1).minimize(
        spec.loss, global_step=tf.compat.v1.train.get_global_step())
    return spec._replace(train_op=train_op)

  model = estimator.Estimator(adam_model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  model.train(_train_input, steps=2)
  caplog.set_level(logging.WARNING)
  model.evaluate(_eval_input)
  list(model.predict(lambda: tf.data.Dataset.from_tensor_slices(_data()[0][:4]).batch(4)))
  gc.collect()  # TF warns of unrestored values when a restore's status is freed
  assert 'could not be found' not in caplog.text  # TF1's Saver restored a subset silently


def test_run_configs_checkpoint_defaults_are_tf1s():
  assert estimator.RunConfig().save_checkpoints_secs == 600
  config = estimator.RunConfig(save_checkpoints_steps=5)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (5, None)
  config = estimator.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)
  assert config.replace(tf_random_seed=1).save_checkpoints_secs is None
  with pytest.raises(ValueError, match='Can not provide both'):
    estimator.RunConfig(save_checkpoints_steps=5, save_checkpoints_secs=5)


def test_without_a_checkpoint_evaluate_and_predict_run_the_initialized_model(
    tmp_path, caplog):
  caplog.set_level(logging.INFO)
  trained = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'trained'),
                                params={'rate': 0.1})
  trained.train(_train_input, steps=20)
  fresh = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'fresh'),
                              params={'rate': 0.1})
  results = fresh.evaluate(_eval_input)
  assert results['global_step'] == 0
  assert ('Could not find trained model in model_dir: '
          f'{tmp_path / "fresh"}, running initialization to evaluate.') in caplog.text
  assert len(list(fresh.predict(lambda: tf.data.Dataset.from_tensor_slices(
      _data()[0][:3]).batch(3)))) == 3
  assert 'running initialization to predict.' in caplog.text
  # Warm-started instead, as TF1's did: the trained model's accuracy.
  warm = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'warm'),
                             params={'rate': 0.1},
                             warm_start_from=str(tmp_path / 'trained'))
  assert warm.evaluate(_eval_input)['accuracy'] == pytest.approx(
      trained.evaluate(_eval_input)['accuracy'])


def test_a_specs_tf_scaffold_init_fn_runs_at_a_fresh_start(tmp_path):
  calls = []

  def model_fn_with_scaffold(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    return spec._replace(scaffold=tf.compat.v1.train.Scaffold(
        init_fn=lambda scaffold, session: calls.append(type(scaffold).__name__)))

  model = estimator.Estimator(model_fn_with_scaffold, model_dir=str(tmp_path),
                              params={'rate': 0.1})
  model.train(_train_input, steps=1)
  assert calls == ['Scaffold']


@pytest.mark.parametrize('arguments', ['mode', 'params', 'config', 'mode, params, config'])
def test_input_fn_gets_the_arguments_it_names_as_tf_passed_them(tmp_path, arguments):
  seen = []

  def input_fn(**kwargs):
    seen.append(kwargs)
    return _train_input() if kwargs.get('mode', 'train') == 'train' else _eval_input()

  names = [name.strip() for name in arguments.split(',')]
  # A function naming exactly these arguments, as users write them.
  named_input_fn = eval(  # pylint: disable=eval-used
      f'lambda {arguments}: input_fn({", ".join(f"{n}={n}" for n in names)})',
      {'input_fn': input_fn})
  config = estimator.RunConfig(save_checkpoints_steps=2)
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
                              config=config)
  model.train(named_input_fn, max_steps=2)
  model.evaluate(named_input_fn, steps=1)
  assert [sorted(kwargs) for kwargs in seen] == [sorted(names)] * 2
  train, evaluate = seen
  if 'mode' in names:
    assert (train['mode'], evaluate['mode']) == ('train', 'eval')
  if 'params' in names:
    assert train['params'] == {'rate': 0.1}
  if 'config' in names:
    assert train['config'] is model.config and train['config'].model_dir == str(tmp_path)


def test_an_input_fn_with_other_required_arguments_fails_naming_them(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  with pytest.raises(TypeError, match=r"input_fn has arguments \['batch_size'\], "
                     "which Estimator does not pass in mode 'train'.*functools.partial"):
    model.train(lambda batch_size, mode: _train_input(), max_steps=1)


def test_a_one_device_strategy_trains_on_its_device(tmp_path):
  devices, contexts = [], []

  def train_input(input_context=None):
    contexts.append(input_context)
    return _train_input()

  def placed_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    devices.append(spec.loss.device)
    return spec

  strategy = tf.distribute.OneDeviceStrategy('/cpu:1')
  model = estimator.Estimator(
      placed_model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy))
  assert model.config.train_distribute is strategy
  model.train(train_input, max_steps=5)
  results = model.evaluate(_eval_input)
  assert results['global_step'] == 5 and results['accuracy'] > 0.4
  assert devices == ['/job:localhost/replica:0/task:0/device:CPU:1'] * 2
  # As TF under a strategy: one input pipeline, one replica.
  (context,) = contexts
  assert (context.num_input_pipelines, context.input_pipeline_id,
          context.num_replicas_in_sync) == (1, 0, 1)


def test_device_fn_places_the_graphs_ops(tmp_path):
  devices = []

  def placed_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    devices.append(spec.loss.device)
    return spec

  model = estimator.Estimator(
      placed_model_fn, model_dir=str(tmp_path), params={'rate': 0.1},
      config=estimator.RunConfig(device_fn=lambda op: '/cpu:1'))
  model.train(_train_input, max_steps=2)
  assert devices == ['/cpu:1']


def test_get_params_and_the_bound_model_fn(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  params = model.get_params()
  assert params['model_fn'] is model_fn and params['params'] == {'rate': 0.1}
  assert list(inspect.signature(model.model_fn).parameters) == [
      'features', 'labels', 'mode', 'config']


def test_export_savedmodel_and_export_all_saved_models_write_the_predict_graph(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'model'),
                              params={'rate': 0.1})
  model.train(_train_input, max_steps=2)

  def receiver():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    return estimator.export.TensorServingInputReceiver(x, x)

  for path in (model.export_savedmodel(str(tmp_path / 'v1'), receiver,
                                       strip_default_attrs=True),
               model.experimental_export_all_saved_models(
                   str(tmp_path / 'all'), {estimator.ModeKeys.PREDICT: receiver})):
    assert 'serving_default' in tf.saved_model.load(path.decode()).signatures
  with pytest.raises(ValueError, match="input_receiver_fn_map has modes.*'train'.*"
                     'PREDICT graph only'):
    model.experimental_export_all_saved_models(
        str(tmp_path / 'all'), {estimator.ModeKeys.TRAIN: receiver})
