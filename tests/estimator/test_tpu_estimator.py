"""TPUEstimator(use_tpu=False): a BERT-shaped program runs on CPU as TF <= 2.15 ran it."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from tfmon import estimator
from tfmon.estimator import tpu

_SEEN = []  # (caller, mode, params['batch_size'], params.get('use_tpu'))


def _examples(n=32, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, 10, size=(n, 6)).astype(np.int32)
  return ids, (ids.sum(axis=1) > 27).astype(np.int32)


def input_fn_builder(is_training):
  """BERT's run_classifier.py input_fn_builder, on arrays."""

  def input_fn(params):
    batch_size = params['batch_size']
    _SEEN.append(('input_fn', is_training, batch_size, params.get('use_tpu')))
    ids, labels = _examples()
    d = tf.data.Dataset.from_tensor_slices({'input_ids': ids, 'label_ids': labels})
    if is_training:
      d = d.repeat()
    return d.batch(batch_size=batch_size, drop_remainder=True)

  return input_fn


def model_fn_builder(init_checkpoint=None, learning_rate=0.1):
  """BERT's model_fn_builder: a TPUEstimatorSpec in every mode, scaffold_fn
  warm-starting from `init_checkpoint`, eval_metrics a (metric_fn, tensors) pair."""

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    _SEEN.append(('model_fn', mode, params.get('batch_size'), params['use_tpu']))
    input_ids, label_ids = features['input_ids'], features['label_ids']
    embeddings = tf.compat.v1.get_variable('bert/embeddings', [10, 8])
    output_weights = tf.compat.v1.get_variable(
        'output_weights', [2, 8],
        initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.compat.v1.get_variable('output_bias', [2],
                                            initializer=tf.zeros_initializer())
    pooled = tf.reduce_mean(tf.nn.embedding_lookup(embeddings, input_ids), axis=1)
    logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True),
                            output_bias)
    probabilities = tf.nn.softmax(logits, axis=-1)
    one_hot = tf.one_hot(label_ids, depth=2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits), axis=-1)
    total_loss = tf.reduce_mean(per_example_loss)

    scaffold_fn = None
    if init_checkpoint:

      def tpu_scaffold():
        tf.compat.v1.train.init_from_checkpoint(init_checkpoint, {'bert/': 'bert/'})
        return tf.compat.v1.train.Scaffold()

      scaffold_fn = tpu_scaffold

    if mode == estimator.ModeKeys.TRAIN:
      train_op = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(
          total_loss, global_step=tf.compat.v1.train.get_global_step())
      return tpu.TPUEstimatorSpec(mode=mode, loss=total_loss, train_op=train_op,
                                  scaffold_fn=scaffold_fn)
    if mode == estimator.ModeKeys.EVAL:

      def metric_fn(per_example_loss, label_ids, logits, is_real_example):
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            'eval_accuracy': tf.compat.v1.metrics.accuracy(
                labels=label_ids, predictions=predictions, weights=is_real_example),
            'eval_loss': tf.compat.v1.metrics.mean(
                values=per_example_loss, weights=is_real_example)}

      eval_metrics = (metric_fn, [per_example_loss, label_ids, logits,
                                  tf.ones(tf.shape(label_ids), dtype=tf.float32)])
      return tpu.TPUEstimatorSpec(mode=mode, loss=total_loss, eval_metrics=eval_metrics,
                                  scaffold_fn=scaffold_fn)
    return tpu.TPUEstimatorSpec(mode=mode, predictions={'probabilities': probabilities},
                                scaffold_fn=scaffold_fn)

  return model_fn


def _estimator(model_dir, model_fn=None, **kwargs):
  run_config = tpu.RunConfig(
      master=None, model_dir=str(model_dir), save_checkpoints_steps=5,
      log_step_count_steps=4,
      tpu_config=tpu.TPUConfig(iterations_per_loop=2, num_shards=8,
                               per_host_input_for_training=tpu.InputPipelineConfig.PER_HOST_V2))
  arguments = dict(use_tpu=False, train_batch_size=8, eval_batch_size=4,
                   predict_batch_size=2)
  arguments.update(kwargs)
  return tpu.TPUEstimator(model_fn=model_fn or model_fn_builder(), config=run_config,
                          **arguments)


@pytest.fixture(autouse=True)
def _forget_seen():
  _SEEN.clear()


def test_train_evaluate_predict_with_params_batch_size(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  model = _estimator(tmp_path)
  model.train(input_fn_builder(True), max_steps=10)
  assert model.latest_checkpoint().endswith('model.ckpt-10')
  results = model.evaluate(input_fn_builder(False), steps=3)
  assert set(results) == {'eval_accuracy', 'eval_loss', 'loss', 'global_step'}
  assert results['global_step'] == 10 and 0 <= results['eval_accuracy'] <= 1
  predictions = list(model.predict(input_fn_builder(False)))
  assert len(predictions) == 32 and predictions[0]['probabilities'].shape == (2,)
  # As TF's TPUEstimator off TPU: each mode's global batch size, the input on the
  # CPU, params['use_tpu'] False for the model_fn only (this model_fn under
  # tensorflow-estimator 2.15 recorded the same list, and the same log lines).
  assert _SEEN == [('input_fn', True, 8, None), ('model_fn', 'train', 8, False),
                   ('input_fn', False, 4, None), ('model_fn', 'eval', 4, False),
                   ('input_fn', False, 2, None), ('model_fn', 'infer', 2, False)]
  assert 'Running train on CPU/GPU' in caplog.text
  # The step rate every ceil(log_step_count_steps / iterations_per_loop) steps,
  # examples/sec with it; no loss line (TF's TPUEstimator logged none off TPU).
  assert 'examples/sec: ' in caplog.text and 'global_step/sec: ' in caplog.text
  assert ', step = ' not in caplog.text


def test_scaffold_fn_warm_starts_from_the_init_checkpoint(tmp_path):
  pretrained = _estimator(tmp_path / 'pretrained')
  pretrained.train(input_fn_builder(True), max_steps=5)
  embeddings = pretrained.get_variable_value('bert/embeddings')
  model = _estimator(tmp_path / 'finetuned', model_fn_builder(
      init_checkpoint=pretrained.latest_checkpoint(), learning_rate=0.0))
  model.train(input_fn_builder(True), max_steps=1)
  np.testing.assert_array_equal(model.get_variable_value('bert/embeddings'), embeddings)
  assert not np.array_equal(model.get_variable_value('output_weights'),
                            pretrained.get_variable_value('output_weights'))


def test_export_calls_the_model_fn_without_batch_size(tmp_path, caplog):
  model = _estimator(tmp_path / 'model', export_to_tpu=False)
  model.train(input_fn_builder(True), max_steps=2)

  def serving_input_fn():
    ids = tf.compat.v1.placeholder(tf.int32, [None, 6], name='input_ids')
    features = {'input_ids': ids, 'label_ids': tf.zeros_like(ids[:, 0])}
    return estimator.export.ServingInputReceiver(features, {'input_ids': ids})

  caplog.set_level(logging.WARNING)
  path = model.export_saved_model(str(tmp_path / 'export'), serving_input_fn)
  assert _SEEN[-1] == ('model_fn', 'infer', None, False)
  assert 'export_to_tpu' not in caplog.text
  served = tf.saved_model.load(path.decode()).signatures['serving_default']
  outputs = served(input_ids=tf.constant(_examples(3)[0]))
  assert outputs['probabilities'].shape == (3, 2)
  _estimator(tmp_path / 'model').export_saved_model(str(tmp_path / 'e2'),
                                                    serving_input_fn)
  assert 'TPUEstimator(export_to_tpu=True): the SavedModel holds the CPU graph' in (
      caplog.text)


def test_an_estimator_spec_from_the_model_fn_runs_too(tmp_path):

  def model_fn(features, labels, mode, params):
    spec = model_fn_builder()(features, labels, mode, params)
    return spec.as_estimator_spec()

  model = _estimator(tmp_path, model_fn)
  model.train(input_fn_builder(True), max_steps=2)
  assert model.evaluate(input_fn_builder(False), steps=1)['global_step'] == 2


def test_host_call_results_run_every_step(tmp_path):
  calls = []

  def model_fn(features, labels, mode, params):
    spec = model_fn_builder()(features, labels, mode, params)

    def host_fn(loss):
      return tf.py_function(lambda value: calls.append(float(value)) or 0.0,
                            [loss[0]], tf.float32)

    return spec._replace(host_call=(host_fn, [tf.reshape(spec.loss, [1])]))

  model = _estimator(tmp_path, model_fn)
  model.train(input_fn_builder(True), max_steps=3)
  assert len(calls) == 3


def test_use_tpu_true_and_other_misuse_fail_at_construction_naming_the_fix(tmp_path):
  with pytest.raises(ValueError, match=r'use_tpu=True.*pass use_tpu=False.*TPUStrategy'):
    _estimator(tmp_path, use_tpu=True)
  with pytest.raises(ValueError, match='`config` must be provided with type '
                     '`tfmon.estimator.tpu.RunConfig`'):
    tpu.TPUEstimator(model_fn_builder(), config=estimator.RunConfig(), use_tpu=False)
  with pytest.raises(ValueError, match='reserved keys but existed in params'):
    _estimator(tmp_path, params={'batch_size': 3})
  with pytest.raises(ValueError, match=r"does not include params argument.*"
                     r"params\['batch_size'\]"):
    _estimator(tmp_path, lambda features, labels, mode: None)
  with pytest.raises(ValueError, match='train_batch_size must be a positive integer'):
    _estimator(tmp_path, train_batch_size=0)
  with pytest.raises(ValueError, match='TPU embeddings need TPUs'):
    _estimator(tmp_path, embedding_config_spec=object())
  with pytest.raises(ValueError, match='a TPU cluster resolver needs TPUs'):
    tpu.RunConfig(cluster=object())
  with pytest.raises(ValueError, match='Invalid TPUConfig `iterations_per_loop`'):
    tpu.TPUConfig(iterations_per_loop='2x')
  model = _estimator(tmp_path)
  with pytest.raises(ValueError, match='input_fn .* does not include params argument'):
    model.train(lambda: None, max_steps=1)


def test_tpu_estimator_spec_checks_its_host_calls():
  with pytest.raises(ValueError, match='eval_metrics should have two elements'):
    tpu.TPUEstimatorSpec(mode='eval', loss=1.0, eval_metrics=(lambda: {},))
  with pytest.raises(TypeError, match=r'host_call\[0\] should be callable'):
    tpu.TPUEstimatorSpec(mode='train', host_call=(1, []))
  with pytest.raises(ValueError, match=r'eval_metrics\[1\] should be tuple or list, or '
                     'dict'):
    tpu.TPUEstimatorSpec(mode='eval', eval_metrics=(lambda: {}, 1))


def test_tpu_run_config_keeps_tpu_config_through_replace():
  config = tpu.RunConfig(tpu_config=tpu.TPUConfig(iterations_per_loop='30s'),
                         master='grpc://tpu:8470', save_checkpoints_steps=10)
  replaced = config.replace(save_summary_steps=7)
  assert replaced.tpu_config.iterations_per_loop == '30s'
  assert (replaced.master, replaced.evaluation_master) == ('grpc://tpu:8470',) * 2
  assert replaced.replace(tpu_config=tpu.TPUConfig()).tpu_config.iterations_per_loop == 2
  assert tpu.TPUConfig(per_host_input_for_training=False).per_host_input_for_training == (
      tpu.InputPipelineConfig.PER_SHARD_V1)
