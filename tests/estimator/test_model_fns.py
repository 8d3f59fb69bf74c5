"""model_fns as real TF1 programs wrote them: summaries of metrics and inputs,
Keras layers, op names given to hooks, seeded layers."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.estimator import recorded
from tfmon import estimator

def reference():
  """data/make_tf215_model_fns.py: its data, and a model_fn TF 2.15 ran."""
  return recorded.script('model_fns')


def _spec(mode, features, labels, logits, **kwargs):
  """A classifier's spec for `logits` (GradientDescent, accuracy)."""
  predictions = {'classes': tf.argmax(logits, 1),
                 'probabilities': tf.nn.softmax(logits, name='softmax_tensor')}
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
        'serving_default': estimator.export.PredictOutput(predictions)})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'accuracy': tf.compat.v1.metrics.accuracy(labels, predictions['classes'])},
                                 **kwargs)


def _summaries(directory):
  """`{tag: [step, ...]}` of the summaries in `directory`'s event files."""
  tags = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(directory, 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(event.step)
  return tags


def test_a_summary_of_a_metric_update_op_records_from_the_first_run(tmp_path):
  # The pattern of TF's own samples: the update op's value, as a training curve.
  def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features['x'], 3)
    spec = _spec(mode, features, labels, logits)
    if mode == estimator.ModeKeys.TRAIN:
      tf.compat.v1.summary.scalar('train_accuracy', spec.eval_metric_ops['accuracy'][1])
    return spec

  model = estimator.Estimator(model_fn, str(tmp_path), config=estimator.RunConfig(
      save_summary_steps=2))
  model.train(reference().train_input, steps=3)  # the first run records
  model.train(reference().train_input, steps=2)  # and a resumed one
  # Each session's first run records, then every 2 steps, as TF1's hook did.
  assert _summaries(str(tmp_path))['train_accuracy'] == [1, 3, 4]
  assert 'accuracy' in model.evaluate(reference().eval_input)


def test_a_summary_of_the_input_features_is_recorded(tmp_path):
  def model_fn(features, labels, mode):
    tf.compat.v1.summary.image('input', tf.reshape(features['x'], [-1, 2, 2, 1]))
    tf.compat.v1.summary.histogram('labels', labels)  # IteratorGetNext:1
    return _spec(mode, features, labels, tf.compat.v1.layers.dense(features['x'], 3))

  model = estimator.Estimator(model_fn, str(tmp_path))
  model.train(reference().train_input, steps=2)
  recorded = _summaries(str(tmp_path))
  assert recorded['input/image/0'] == recorded['labels'] == [1]


def test_logging_tensor_hook_given_op_names_logs_their_values(tmp_path, caplog):
  # TF's layers tutorial: {'probabilities': 'softmax_tensor'}, an op's name.
  def model_fn(features, labels, mode):
    hooks = [tf.compat.v1.train.LoggingTensorHook(
                 {'probabilities': 'softmax_tensor'}, every_n_iter=1),
             estimator.LoggingTensorHook({'classes': 'ArgMax'}, every_n_iter=1)]
    return _spec(mode, features, labels, tf.compat.v1.layers.dense(features['x'], 3),
                 training_hooks=hooks)

  caplog.set_level(logging.INFO)
  estimator.Estimator(model_fn, str(tmp_path)).train(reference().train_input, steps=2)
  logged = [m for m in caplog.messages if m.startswith(('probabilities', 'classes'))]
  assert len(logged) == 4 and not any('None' in m for m in logged), logged
  assert any(m.startswith('probabilities = [[0.') for m in logged)


def _keras_model_fn(keras, sequential=False):
  """Two Dense layers of `keras` (tf_keras, or tf.keras), or a Sequential of them."""
  def model_fn(features, labels, mode):
    layers = [keras.layers.Dense(5, activation='relu'), keras.layers.Dense(3)]
    model = keras.Sequential(layers) if sequential else lambda x: layers[1](layers[0](x))
    return _spec(mode, features, labels, model(features['x']))
  return model_fn


@pytest.mark.parametrize('which', ['tf_keras', 'keras3'])
@pytest.mark.parametrize('sequential', [False, True], ids=['layers', 'sequential'])
def test_keras_layers_have_tf215s_names_in_every_mode(tmp_path, sequential, which):
  # Keras 3 names a TF variable by its bare name ('kernel', 'kernel_1') and its
  # layers by process-wide counters; tf_keras (Keras 2) as TF 2.15 did.
  if which == 'tf_keras':
    keras = pytest.importorskip('tf_keras')
  else:
    keras = pytest.importorskip('keras')
    if not keras.__version__.startswith('3.'):
      pytest.skip('keras is not Keras 3 here')
  model = estimator.Estimator(_keras_model_fn(keras, sequential), str(tmp_path))
  model.train(reference().train_input, steps=2)
  # TF 2.15's tf.keras (Keras 2, which tf_keras is) named them so in a model_fn.
  scope = 'sequential/' if sequential else ''
  names = sorted([f'{scope}dense/bias', f'{scope}dense/kernel', f'{scope}dense_1/bias',
                  f'{scope}dense_1/kernel', 'global_step'])
  assert model.get_variable_names() == names
  # Every mode finds the variables the TRAIN graph saved, by those names.
  first = model.evaluate(reference().eval_input)
  predicted = np.stack([p['probabilities'] for p in model.predict(
      reference().predict_input)])
  export_dir = model.export_saved_model(
      str(tmp_path / 'export'), reference().serving_input_receiver_fn(estimator))
  served = tf.saved_model.load(export_dir.decode()).signatures['serving_default'](
      x=tf.constant(reference().features()[:5]))['probabilities']
  np.testing.assert_allclose(served, predicted, rtol=1e-6)
  model.train(reference().train_input, steps=2)
  assert model.get_variable_names() == names
  assert model.evaluate(reference().eval_input)['loss'] != first['loss']


_LEGACY_KERAS_PROGRAM = """
import sys
import tensorflow as tf
from tests.estimator import recorded
from tfmon import estimator
from tests.estimator import test_model_fns as t
model = estimator.Estimator(t._keras_model_fn(tf.keras), sys.argv[1])  # tf_keras here
model.train(t.reference().train_input, steps=2)
model.evaluate(t.reference().eval_input)
model.train(t.reference().train_input, steps=2)
print(model.get_variable_names())
"""


@pytest.mark.slow
def test_tf_keras_under_tf_use_legacy_keras_has_tf215s_names(tmp_path):
  pytest.importorskip('tf_keras')
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  result = subprocess.run(
      [sys.executable, '-c', _LEGACY_KERAS_PROGRAM, str(tmp_path)], cwd=root,
      env={**os.environ, 'TF_USE_LEGACY_KERAS': '1'}, capture_output=True, text=True,
      timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.splitlines()[-1] == str(
      ['dense/bias', 'dense/kernel', 'dense_1/bias', 'dense_1/kernel', 'global_step'])


def test_seeded_v1_layers_start_from_tf1s_values_in_every_run(tmp_path):
  tf1_values = recorded.values('model_fns')['seeded_layers']
  runs = []
  for run in range(2):
    model_dir = str(tmp_path / str(run))
    reference().make_estimator(estimator, model_dir).train(
        reference().train_input, steps=1)
    runs.append(reference().initial_layer_values(model_dir))
  assert runs[0] == runs[1]
  # What TF 2.15 gave them under disable_v2_behavior(), with the same seed.
  assert sorted(runs[0]) == sorted(tf1_values)
  for name, value in tf1_values.items():
    np.testing.assert_array_equal(np.float32(runs[0][name]), np.float32(value), name)
