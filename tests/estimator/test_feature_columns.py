"""tf.feature_column input layers in a model_fn, as TF1's tutorials fed DataFrames."""

import numpy as np
import pandas as pd
import tensorflow as tf

from tfmon import estimator


def _frame(seed, n=64):
  rng = np.random.default_rng(seed)
  frame = pd.DataFrame({
      'age': rng.uniform(18, 80, n).astype(np.float32),
      'color': rng.choice(['red', 'green', 'blue'], n),
      'city': rng.choice(['paris', 'lima', 'oslo', 'rome'], n)})
  # The label depends on every column, so each must reach the model.
  label = (frame['color'] == 'red') | (frame['city'] == 'oslo') | (frame['age'] > 70)
  return frame, label.astype(np.int64)


def model_fn(features, labels, mode, params):
  fc = tf.feature_column
  color = fc.categorical_column_with_vocabulary_list('color', ['red', 'green', 'blue'])
  city = fc.categorical_column_with_vocabulary_file(
      'city', params['cities'], vocabulary_size=4)
  net = tf.compat.v1.feature_column.input_layer(features, [
      fc.bucketized_column(fc.numeric_column('age'), [30.0, 50.0, 70.0]),
      fc.indicator_column(color),
      fc.embedding_column(city, dimension=3)])
  logits = tf.compat.v1.layers.dense(tf.compat.v1.layers.dense(net, 8, tf.nn.relu), 2)
  logits += tf.compat.v1.feature_column.linear_model(features, [
      fc.crossed_column(['color', 'city'], hash_bucket_size=16),
      fc.categorical_column_with_hash_bucket('city', hash_bucket_size=8)], units=2)
  classes = tf.argmax(logits, 1)
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions={'classes': classes})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'accuracy': tf.compat.v1.metrics.accuracy(labels, classes)})


def test_a_model_fn_of_feature_columns_trains_evaluates_and_predicts(tmp_path):
  cities = tmp_path / 'cities.txt'
  cities.write_text('paris\nlima\noslo\nrome\n')
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path / 'model'),
                              params={'cities': str(cities)},
                              config=estimator.RunConfig(tf_random_seed=1))
  frame, labels = _frame(0)
  model.train(estimator.inputs.pandas_input_fn(
      frame, labels, batch_size=16, num_epochs=None, shuffle=True), steps=150)
  assert model.get_variable_value(
      'input_layer/city_embedding/embedding_weights').shape == (4, 3)
  assert model.get_variable_value('linear_model/city_X_color/weights').shape == (16, 2)

  test_frame, test_labels = _frame(1)
  results = model.evaluate(estimator.inputs.pandas_input_fn(
      test_frame, test_labels, batch_size=32, shuffle=False))
  assert results['global_step'] == 150 and results['accuracy'] > 0.95

  predictions = list(model.predict(estimator.inputs.pandas_input_fn(
      test_frame, batch_size=32, shuffle=False)))
  classes = np.array([p['classes'] for p in predictions])
  assert len(classes) == 64 and np.mean(classes == test_labels) > 0.95
