"""The TF1 layers tutorial's cnn_mnist.py on tfmon.estimator: train, evaluate,
predict, export, and train again from the checkpoint."""

import functools
import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip('tf_keras')  # tf.compat.v1.layers

_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'examples',
                       'estimator_cnn_mnist.py')


@functools.cache  # its absl flags can be defined once
def _example():
  spec = importlib.util.spec_from_file_location('estimator_cnn_mnist', _SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_the_tutorials_model_fn_trains_evaluates_predicts_exports_and_resumes(tmp_path):
  example = _example()
  estimator = example.estimator
  images, labels = example.synthetic_mnist(200, seed=0)
  classifier = estimator.Estimator(model_fn=example.cnn_model_fn,
                                   model_dir=str(tmp_path))
  train_input = estimator.inputs.numpy_input_fn(
      x={'x': images}, y=labels, batch_size=20, num_epochs=None, shuffle=True)
  classifier.train(input_fn=train_input, steps=10)
  results = classifier.evaluate(input_fn=estimator.inputs.numpy_input_fn(
      x={'x': images[:50]}, y=labels[:50], batch_size=25, num_epochs=1, shuffle=False))
  assert results['global_step'] == 10 and 0 <= results['accuracy'] <= 1
  assert {'conv2d/kernel', 'dense_1/bias', 'global_step'} <= set(
      classifier.get_variable_names())
  predictions = list(classifier.predict(input_fn=estimator.inputs.numpy_input_fn(
      x={'x': images[:7]}, batch_size=5, shuffle=False)))
  assert len(predictions) == 7
  assert predictions[0]['probabilities'].shape == (10,)
  assert sum(predictions[0]['probabilities']) == pytest.approx(1.0, abs=1e-5)
  receiver_fn = estimator.export.build_raw_serving_input_receiver_fn(
      {'x': tf.TensorSpec([None, 784], tf.float32)})
  exported = classifier.export_saved_model(str(tmp_path / 'export'), receiver_fn)
  served = tf.saved_model.load(exported.decode()).signatures['serving_default'](
      x=tf.constant(images[:7]))
  np.testing.assert_allclose(served['probabilities'],
                             [p['probabilities'] for p in predictions], rtol=1e-5)
  classifier.train(input_fn=train_input, steps=5)
  assert classifier.latest_checkpoint().endswith('model.ckpt-15')


def test_numpy_input_fn_asks_for_shuffle_as_tf1_did():
  example = _example()
  with pytest.raises(ValueError, match='shuffle must be provided and explicitly set'):
    example.estimator.inputs.numpy_input_fn(x={'x': example.synthetic_mnist(4, 0)[0]})
