"""numpy_input_fn and pandas_input_fn: the batches TF1's queues gave, from tf.data."""

import importlib.util

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmon
from tfmon import estimator
from tfmon.estimator import inputs


def _batches(dataset):
  return [tf.nest.map_structure(lambda t: t.numpy(), batch) for batch in dataset]


def test_numpy_input_fn_batches_dicts_of_arrays_keeping_the_last_partial_batch():
  x = {'b': np.arange(10, dtype=np.float32), 'a': np.arange(10, 20)}
  batches = _batches(inputs.numpy_input_fn(x, np.arange(-10, 0), batch_size=4,
                                           shuffle=False)())
  assert [len(labels) for _, labels in batches] == [4, 4, 2]  # dequeue_up_to's
  features, labels = batches[2]
  np.testing.assert_array_equal(features['a'], [18, 19])
  assert features['b'].dtype == np.float32 and features['a'].dtype == np.int64
  np.testing.assert_array_equal(labels, [-2, -1])


def test_numpy_input_fn_epochs_follow_each_other_and_none_repeats_full_batches():
  x = np.arange(10)  # one array: features are one tensor
  two_epochs = _batches(inputs.numpy_input_fn(x, batch_size=4, num_epochs=2,
                                              shuffle=False)())
  assert [len(batch) for batch in two_epochs] == [4, 4, 4, 4, 4]
  np.testing.assert_array_equal(two_epochs[2], [8, 9, 0, 1])

  forever = inputs.numpy_input_fn(x, batch_size=4, num_epochs=None, shuffle=True)()
  assert forever.element_spec.shape.as_list() == [4]  # static, as dequeue_many's
  seen = np.concatenate([batch.numpy() for batch in forever.take(10)])
  assert sorted(seen[:10]) == list(range(10))  # the first epoch, shuffled
  assert not np.array_equal(seen[:10], np.arange(10))


def test_numpy_input_fn_labels_may_be_a_dict():
  features, labels = _batches(inputs.numpy_input_fn(
      {'x': np.ones((3, 2))}, {'y1': np.arange(3), 'y2': np.zeros(3)},
      batch_size=8, shuffle=False)())[0]
  assert features['x'].shape == (3, 2)
  assert sorted(labels) == ['y1', 'y2']
  np.testing.assert_array_equal(labels['y1'], [0, 1, 2])


def test_the_data_is_captured_not_copied_into_the_graph():
  # MNIST's 60000 images took 18 s to start training as graph constants.
  images = np.zeros((2000, 256), np.float32)  # 2 MB
  graph = tfmon.Graph()
  with graph.as_default():
    dataset = inputs.numpy_input_fn({'x': images}, shuffle=False)()
    tf.compat.v1.data.make_initializable_iterator(dataset)
  assert graph.as_graph_def().ByteSize() < images.nbytes / 10


def test_numpy_input_fn_misuse_fails_naming_the_value():
  with pytest.raises(ValueError, match='shuffle must be provided and explicitly set'):
    inputs.numpy_input_fn({'x': np.ones(3)})
  with pytest.raises(ValueError, match='Length of tensors in x and y is mismatched'
                     r"(.|\n)*Shapes in x: \{'x': \(3,\)\}\nShapes in y: \(2,\)"):
    inputs.numpy_input_fn({'x': np.ones(3)}, np.ones(2), shuffle=False)
  with pytest.raises(ValueError, match=r"1 duplicate keys are found in both x and y: "
                     r"\{'x'\}"):
    inputs.numpy_input_fn({'x': np.ones(3)}, {'x': np.ones(3)}, shuffle=False)
  with pytest.raises(ValueError, match='x cannot be an empty dict'):
    inputs.numpy_input_fn({}, shuffle=False)
  with pytest.raises(TypeError, match='x must be a dict or array; got list'):
    inputs.numpy_input_fn([1, 2], shuffle=False)
  with pytest.raises(ValueError, match='num_epochs=0 must be a positive integer, or None'):
    inputs.numpy_input_fn({'x': np.ones(3)}, shuffle=False, num_epochs=0)


def _frame():
  return pd.DataFrame({'size': [1.0, 2.0, 3.0, 4.0, 5.0],
                       'color': ['red', 'blue', 'red', 'green', 'blue']},
                      index=[10, 11, 12, 13, 14])


def test_pandas_input_fn_feeds_columns_by_name_and_a_series_as_labels():
  frame = _frame()
  batches = _batches(inputs.pandas_input_fn(
      frame, pd.Series([0, 1, 0, 1, 1], index=frame.index), batch_size=2,
      shuffle=False)())
  assert [len(labels) for _, labels in batches] == [2, 2, 1]
  features, labels = batches[0]
  assert sorted(features) == ['color', 'size']  # not the index, not the target
  np.testing.assert_array_equal(features['color'], [b'red', b'blue'])
  np.testing.assert_array_equal(features['size'], [1.0, 2.0])
  np.testing.assert_array_equal(labels, [0, 1])
  assert list(frame.columns) == ['size', 'color']  # x is not changed

  features, labels = _batches(inputs.pandas_input_fn(
      frame, pd.DataFrame({'a': range(5), 'b': range(5, 10)}, index=frame.index),
      batch_size=8, num_epochs=None, shuffle=True)().take(1))[0]
  assert sorted(labels) == ['a', 'b'] and len(features['size']) == 8
  np.testing.assert_array_equal(labels['b'] - labels['a'], [5] * 8)  # rows stay whole


def test_pandas_input_fn_misuse_fails_naming_the_value(monkeypatch):
  frame = _frame()
  with pytest.raises(ValueError, match='shuffle must be provided'):
    inputs.pandas_input_fn(frame)
  with pytest.raises(ValueError, match='Cannot use name size for target column: '
                     'DataFrame already has a column with that name'):
    inputs.pandas_input_fn(frame, pd.Series(range(5), index=frame.index),
                           target_column='size', shuffle=False)
  with pytest.raises(ValueError, match='Index for x and y are mismatched'):
    inputs.pandas_input_fn(frame, pd.Series(range(5)), shuffle=False)
  with pytest.raises(TypeError, match='x must be a pandas DataFrame; got dict '
                     r'\(numpy arrays: use numpy_input_fn\)'):
    inputs.pandas_input_fn({'size': np.ones(5)}, shuffle=False)
  monkeypatch.setattr(importlib.util, 'find_spec',
                      lambda name, *args: None if name == 'pandas' else 'found')
  with pytest.raises(TypeError, match='without pandas installed: `pip install pandas`'):
    inputs.pandas_input_fn({'size': np.ones(5)}, shuffle=False)


def test_an_estimator_trains_and_evaluates_from_numpy_input_fn(tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 2)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int64)

  def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features['x'], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return estimator.EstimatorSpec(
        mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.5).minimize(loss, global_step=tf.compat.v1.train.get_global_step()),
        eval_metric_ops={'accuracy': tf.compat.v1.metrics.accuracy(
            labels, tf.argmax(logits, 1))})

  model = estimator.Estimator(model_fn, model_dir=str(tmp_path))
  model.train(inputs.numpy_input_fn({'x': x}, y, batch_size=8, num_epochs=None,
                                    shuffle=True), steps=30)
  results = model.evaluate(inputs.numpy_input_fn({'x': x}, y, batch_size=16,
                                                 shuffle=False))
  assert results['global_step'] == 30 and results['accuracy'] > 0.9
