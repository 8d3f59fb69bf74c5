"""Estimator.export_saved_model, serving receivers, and the exporters of
train_and_evaluate: TF2 SavedModels that serve what Estimator.predict predicts."""

import logging
import os

from absl import logging as absl_logging
import numpy as np
import pytest
import tensorflow as tf

from tfmon import estimator
from tfmon.estimator import export
from tests.estimator.test_estimator import _data  # pylint: disable=g-bad-import-order

NAMES = ['setosa', 'versicolor', 'virginica']


def model_fn(features, labels, mode, params):
  """TF1 Estimator code with a dict of features, and TF1's classification
  signature (class names from a lookup table) when params['classify']."""
  weights = tf.compat.v1.get_variable('dense/kernel', [4, 3])
  bias = tf.compat.v1.get_variable('dense/bias', [3],
                                   initializer=tf.compat.v1.zeros_initializer())
  logits = tf.matmul(features['x'], weights) + bias
  predictions = {'classes': tf.argmax(logits, 1),
                 'probabilities': tf.nn.softmax(logits)}
  if mode == estimator.ModeKeys.PREDICT:
    export_outputs = None
    if params.get('classify'):
      table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
          tf.range(3, dtype=tf.int64), tf.constant(NAMES)), 'unknown')
      predictions['names'] = table.lookup(predictions['classes'])
      export_outputs = {
          'serving_default': export.ClassificationOutput(
              scores=predictions['probabilities'], classes=predictions['names']),
          'predict': export.PredictOutput(predictions)}
    return estimator.EstimatorSpec(mode=mode, predictions=predictions,
                                   export_outputs=export_outputs)
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == estimator.ModeKeys.TRAIN:
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
  return estimator.EstimatorSpec(mode=mode, loss=loss)


def _train_input():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices(({'x': features}, labels)).repeat().batch(8)


def _eval_input():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices(({'x': features}, labels)).batch(32)


def _trained(model_dir, classify=False, steps=5):
  model = estimator.Estimator(model_fn, model_dir=str(model_dir),
                              params={'classify': classify})
  return model.train(_train_input, steps=steps)


def _predicted(model, x):
  return list(model.predict(
      lambda: tf.data.Dataset.from_tensor_slices({'x': x}).batch(len(x)),
      yield_single_examples=False))[0]


def _examples(x):
  return tf.constant([tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString()
                      for row in x])


def test_export_serves_what_predict_predicts(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  model = _trained(tmp_path / 'model')
  receiver_fn = export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, 4])})
  absl_level = absl_logging.get_absl_logger().level
  path = model.export_saved_model(str(tmp_path / 'serving'), receiver_fn)
  assert absl_logging.get_absl_logger().level == absl_level  # TF's save changes it

  assert isinstance(path, bytes)  # as TF1 returned it
  version = os.path.basename(path.decode())
  assert version.isdigit() and os.listdir(tmp_path / 'serving') == [version]  # no temp-
  assert "Signatures INCLUDED in export for Predict: ['serving_default']" in caplog.text
  assert f'SavedModel written to: {path.decode()}' in caplog.text

  loaded = tf.saved_model.load(path.decode())
  assert list(loaded.signatures) == ['serving_default']
  x = _data(seed=1, n=6)[0]
  served = loaded.signatures['serving_default'](x=tf.constant(x))
  predicted = _predicted(model, x)
  np.testing.assert_allclose(served['probabilities'], predicted['probabilities'], rtol=1e-6)
  np.testing.assert_array_equal(served['classes'], predicted['classes'])
  # The checkpoint's values, saved by TF1 name (not the initializers').
  kernel = {v.name: v for v in loaded.variables}['dense/kernel:0']
  np.testing.assert_array_equal(kernel, model.get_variable_value('dense/kernel'))


def test_parsing_receiver_and_classification_signature(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  model = _trained(tmp_path / 'model', classify=True)
  feature_spec = {'x': tf.io.FixedLenFeature([4], tf.float32)}
  parsing_fn = export.build_parsing_serving_input_receiver_fn(feature_spec)

  def receiver_fn():  # the parsed features may be fed directly too: 'raw:<key>'
    receiver = parsing_fn()
    return export.ServingInputReceiver(receiver.features, receiver.receiver_tensors,
                                       {'raw': receiver.features})

  vocabulary = tmp_path / 'vocab.txt'
  vocabulary.write_text('\n'.join(NAMES))
  path = model.export_saved_model(
      str(tmp_path / 'serving'), receiver_fn, as_text=True,
      assets_extra={'labels/vocab.txt': str(vocabulary)}).decode()

  assert "Signatures INCLUDED in export for Classify: ['serving_default']" in caplog.text
  # A classification takes one string input: not the raw features (as in TF1).
  assert "'raw:serving_default' : Classification signatures can only accept" in caplog.text
  assert sorted(os.listdir(path)) == ['assets', 'assets.extra', 'fingerprint.pb',
                                      'saved_model.pbtxt', 'variables']
  assert (tmp_path / path / 'assets.extra/labels/vocab.txt').read_text() == (
      vocabulary.read_text())

  loaded = tf.saved_model.load(path)
  assert sorted(loaded.signatures) == ['predict', 'raw:predict', 'serving_default']
  x = _data(seed=2, n=5)[0]
  predicted = _predicted(model, x)
  classified = loaded.signatures['serving_default'](inputs=_examples(x))
  assert [c.decode() for c in classified['classes'].numpy()] == [
      NAMES[i] for i in predicted['classes']]
  np.testing.assert_allclose(classified['scores'], predicted['probabilities'], rtol=1e-6)
  by_examples = loaded.signatures['predict'](examples=_examples(x))
  np.testing.assert_array_equal(by_examples['names'], classified['classes'])
  np.testing.assert_array_equal(predicted['names'], classified['classes'])  # the table
  raw = loaded.signatures['raw:predict'](x=tf.constant(x))
  np.testing.assert_allclose(raw['probabilities'], predicted['probabilities'], rtol=1e-6)


def test_a_model_dir_written_by_tf1_exports(tmp_path):
  # What TF <= 2.15's Estimator left: a TF1 Saver's name-based checkpoint.
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(_train_input()).get_next()
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, estimator.ModeKeys.TRAIN, {})
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(spec.train_op)
      tf.compat.v1.train.Saver().save(session, str(tmp_path / 'model.ckpt'), global_step=1)
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={})
  path = model.export_saved_model(
      str(tmp_path / 'serving'),
      export.build_raw_serving_input_receiver_fn({'x': np.zeros([1, 4], np.float32)}))
  x = _data(seed=3, n=4)[0]
  served = tf.saved_model.load(path.decode()).signatures['serving_default'](x=tf.constant(x))
  np.testing.assert_allclose(served['probabilities'],
                             _predicted(model, x)['probabilities'], rtol=1e-6)


def test_export_refuses_what_cannot_be_served_naming_the_fix(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'model'), params={})
  raw_fn = export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, 4])})
  with pytest.raises(ValueError, match="Couldn't find trained model at .*model: train"):
    model.export_saved_model(str(tmp_path / 'serving'), raw_fn)
  model.train(_train_input, steps=1)
  with pytest.raises(ValueError, match='An input_receiver_fn must be defined.'):
    model.export_saved_model(str(tmp_path / 'serving'), None)
  with pytest.raises(TypeError, match=r'serving_input_receiver_fn returned \{.* of type '
                     'dict: it must return a tfmon.estimator.export.ServingInputReceiver'):
    model.export_saved_model(str(tmp_path / 'serving'), lambda: {'x': tf.zeros([1, 4])})
  eager = tf.zeros([1, 4])
  with pytest.raises(ValueError, match=r"receiver_tensors\['x'\]=.* is not a dense tensor "
                     'of the serving graph: make the receiver tensors inside'):
    model.export_saved_model(str(tmp_path / 'serving'),
                             lambda: export.ServingInputReceiver({'x': eager}, {'x': eager}))
  with pytest.raises(ValueError, match='experimental_mode=.train.: tfmon exports the '
                     'PREDICT graph only'):
    model.export_saved_model(str(tmp_path / 'serving'), raw_fn,
                             experimental_mode=estimator.ModeKeys.TRAIN)
  assert not os.path.exists(tmp_path / 'serving')  # nothing half-written

  with pytest.raises(ValueError, match=r"features\['x'\] must be a Tensor, SparseTensor, "
                     'or RaggedTensor; got array'):
    export.ServingInputReceiver({'x': np.zeros([1, 4])}, {})
  with pytest.raises(ValueError, match='receiver_tensors keys must be strings: 1 is a int'):
    export.ServingInputReceiver({'x': eager}, {1: eager})
  with pytest.raises(TypeError, match=r"features=\[.*\] must be a dict of feature name"):
    export.build_raw_serving_input_receiver_fn([tf.zeros([1, 4])])
  with pytest.raises(TypeError, match='feature_spec=.* must be a dict of feature name'):
    export.build_parsing_serving_input_receiver_fn(tf.io.FixedLenFeature([4], tf.float32))
  with pytest.raises(ValueError, match='Classification classes must be a string Tensor; '
                     'got .* tf.strings.as_string'):
    export.ClassificationOutput(classes=tf.constant([1]))


def test_exporters_export_into_model_dir_after_evaluations(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={},
                              config=estimator.RunConfig(save_checkpoints_steps=10))
  receiver_fn = export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, 4])})
  exporters = [estimator.LatestExporter('latest', receiver_fn, exports_to_keep=2),
               estimator.BestExporter(serving_input_receiver_fn=receiver_fn),
               estimator.FinalExporter('final', receiver_fn)]
  results, exports = estimator.train_and_evaluate(
      model, estimator.TrainSpec(_train_input, max_steps=30),
      estimator.EvalSpec(_eval_input, throttle_secs=0, exporters=exporters))

  assert results['global_step'] == 30
  latest, best, final = (str(tmp_path / 'export' / name)
                         for name in ('latest', 'best_exporter', 'final'))
  # Evaluated (and exported) at steps 10, 20 and 30: the two newest kept.
  assert len(os.listdir(latest)) == 2
  assert 1 <= len(os.listdir(best)) <= 3  # the first evaluation's, then improvements
  assert len(os.listdir(final)) == 1  # at the final evaluation only
  # The last evaluation's exports, in the exporters' order (None: not exported).
  assert exports[0] == os.path.join(latest, max(os.listdir(latest))).encode()
  assert exports[1] in (None, os.path.join(best, max(os.listdir(best))).encode())
  assert exports[2] == os.path.join(final, os.listdir(final)[0]).encode()
  kernel = tf.saved_model.load(exports[2].decode()).variables
  np.testing.assert_array_equal({v.name: v for v in kernel}['dense/kernel:0'],
                                model.get_variable_value('dense/kernel'))


def test_best_exporter_exports_only_on_improvement(tmp_path):
  model = _trained(tmp_path)
  model.evaluate(_eval_input)  # an event file in model_dir/eval, which it reads first
  receiver_fn = export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, 4])})
  best = estimator.BestExporter(serving_input_receiver_fn=receiver_fn, exports_to_keep=1)
  base = str(tmp_path / 'export' / 'best_exporter')
  checkpoint = model.latest_checkpoint()

  def export_with_loss(loss):
    return best.export(model, base, checkpoint, {'loss': loss}, False)

  # The first export happens whatever the event files hold, as TF1's did.
  assert export_with_loss(100.0) is not None
  assert export_with_loss(101.0) is None
  first = os.listdir(base)
  assert export_with_loss(99.0) is not None
  assert len(os.listdir(base)) == 1 and os.listdir(base) != first  # exports_to_keep=1


def test_eval_spec_checks_its_exporters():
  receiver_fn = export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, 4])})
  latest = estimator.LatestExporter('latest', receiver_fn)
  assert estimator.EvalSpec(_eval_input, exporters=latest).exporters == (latest,)
  with pytest.raises(TypeError, match=r"EvalSpec exporters\[0\] is 'latest' of type str, "
                     'not an Exporter: use tfmon.estimator.LatestExporter'):
    estimator.EvalSpec(_eval_input, exporters=['latest'])
  with pytest.raises(ValueError, match="`exporters` must have unique names: 'latest' is "
                     'given twice'):
    estimator.EvalSpec(_eval_input, exporters=[
        latest, estimator.FinalExporter('latest', receiver_fn)])
  with pytest.raises(ValueError, match='`exports_to_keep`, if provided, must be a '
                     'positive number. Got 0'):
    estimator.LatestExporter('latest', receiver_fn, exports_to_keep=0)
  with pytest.raises(ValueError, match='must include current_eval_result argument'):
    estimator.BestExporter(serving_input_receiver_fn=receiver_fn,
                           compare_fn=lambda best_eval_result, current: True)


def test_eval_output_keys_its_tensors_as_tf_and_builds_a_signature_def():
  graph = tf.Graph()
  with graph.as_default():
    labels = tf.compat.v1.placeholder(tf.float32, [None])
    predictions = labels * 2
    accuracy = tf.compat.v1.metrics.mean(predictions)
    output = export.EvalOutput(loss=tf.reduce_mean(predictions),
                               predictions={'p': predictions},
                               metrics={'mean': accuracy})
    assert sorted(output.signature_outputs()) == [
        'loss', 'metrics/mean/update_op', 'metrics/mean/value', 'predictions/p']
    signature = output.as_signature_def({'labels': labels})
  assert signature.method_name == 'tensorflow/supervised/eval'
  assert list(signature.inputs) == ['labels']
  with pytest.raises(ValueError, match=r"metrics\['m'\] must be a \(value, update_op\)"):
    export.EvalOutput(metrics={'m': 1.0})
