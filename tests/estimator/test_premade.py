"""TF 2.15's premade estimators and heads, against what TF 2.15 recorded.

data/make_tf215_premade.py defines the cases and, run under TF 2.15, recorded
data/tf215_premade.json (variables, evaluate(), predict(), serving signatures)
and data/tf215_model_dir (a DNNLinearCombinedClassifier at step 5). Here tfmon
builds the same cases from the same definition: from the same seed it must
give TF 2.15's variable names, values, metrics and predictions; from TF 2.15's
checkpoint, TF 2.15's metrics, before and after training on. The `v1_` cases
are tf.compat.v1.estimator's (tfmon.estimator.canned.v1): TF 1.x's optimizers,
slot names, summed losses and metrics.
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.estimator import recorded as recorded_lib
from tfmon import estimator
from tfmon.estimator import canned



def _reference():
  return recorded_lib.script('premade')


def _recorded():
  return recorded_lib.values('premade')


def _cases():
  return _reference().cases(canned, tf.keras.optimizers, estimator.RunConfig, canned.v1)


def _assert_matches(expected, actual, where):
  """Same keys everywhere; numbers within float32 noise; strings equal."""
  if isinstance(expected, dict):
    assert sorted(actual) == sorted(expected), where
    for key in expected:
      _assert_matches(expected[key], actual[key], f'{where}/{key}')
  elif isinstance(expected, str) or (isinstance(expected, list) and expected and
                                     isinstance(expected[0], (dict, str, list)) and
                                     not _numeric(expected)):
    if isinstance(expected, str):
      assert actual == expected, where
    else:
      assert len(actual) == len(expected), where
      for i, (e, a) in enumerate(zip(expected, actual)):
        _assert_matches(e, a, f'{where}[{i}]')
  else:
    np.testing.assert_allclose(np.asarray(actual, float), np.asarray(expected, float),
                               rtol=2e-5, atol=2e-6, err_msg=where)


def _numeric(value):
  return not isinstance(value, (str, dict)) and (
      not isinstance(value, list) or all(_numeric(v) for v in value))


def _train(name, model_dir):
  reference = _reference()
  make, kind, keys = _cases()[name]
  model = make(str(model_dir), keep_checkpoint_max=1)
  model.train(reference.input_fn(kind, keys), steps=reference.STEPS)
  return model


def _variables(model):
  reader = tf.train.load_checkpoint(model.latest_checkpoint())
  plain = _reference()._plain  # pylint: disable=protected-access
  return {key: plain(reader.get_tensor(key))
          for key in reader.get_variable_to_shape_map()}


def _evaluate_and_predict(model, name):
  reference = _reference()
  _, kind, keys = _cases()[name]
  plain = reference._plain  # pylint: disable=protected-access
  return (plain(model.evaluate(reference.input_fn(kind, keys, epochs=1))),
          plain(list(model.predict(reference.input_fn(kind, keys, with_labels=False)))))


# One case of each estimator and optimizer kind runs by default; the other
# variants (heads, optimizer settings, dropout) are `slow`, to keep this file fast.
_QUICK = ('dnn_classifier', 'dnn_classifier_vocabulary', 'dnn_regressor',
          'linear_classifier', 'linear_regressor', 'dnn_linear_combined_classifier',
          'baseline_classifier', 'dnn_estimator_multi_head', 'v1_dnn_classifier',
          'v1_dnn_linear_combined_classifier')


def _by_speed(names):
  return [name if name in _QUICK else pytest.param(name, marks=pytest.mark.slow)
          for name in sorted(names)]


@pytest.mark.parametrize('name', _by_speed(_reference().cases(
    canned, tf.keras.optimizers, estimator.RunConfig, canned.v1)))
def test_a_premade_estimator_trains_evaluates_and_predicts_as_tf215(name, tmp_path):
  recorded = _recorded()[name]
  model = _train(name, tmp_path)
  # The same variables (TF 2.15's names, optimizer slots included), with the
  # same values: the same initialization from the seed, the same updates.
  _assert_matches(recorded['variables'], _variables(model), 'variables')
  evaluation, predictions = _evaluate_and_predict(model, name)
  _assert_matches(recorded['evaluate'], evaluation, 'evaluate')
  _assert_matches(recorded['predict'], predictions, 'predict')


def test_constructors_take_tf215s_parameters_and_defaults():
  reference, recorded = _reference(), _recorded()
  for namespace, key, names in ((canned, 'constructors', reference.ESTIMATORS +
                                 reference.HEADS),
                                (canned.v1, 'v1_constructors', reference.ESTIMATORS)):
    for name in names:
      assert reference.constructor(getattr(namespace, name)) == recorded[key][name], name


def test_the_binary_classifier_has_tf215s_keys():
  recorded = _recorded()['dnn_linear_combined_classifier']
  assert sorted(recorded['evaluate']) == [
      'accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall', 'average_loss',
      'global_step', 'label/mean', 'loss', 'precision', 'prediction/mean', 'recall']
  assert sorted(recorded['predict'][0]) == [
      'all_class_ids', 'all_classes', 'class_ids', 'classes', 'logistic', 'logits',
      'probabilities']
  assert {'dnn/hiddenlayer_0/kernel', 'dnn/logits/bias',
          'linear/linear_model/x1/weights',
          'linear/linear_model/bias_weights'} <= set(recorded['variables'])


def test_a_tf215_model_dir_continues(tmp_path):
  recorded = _recorded()['dnn_linear_combined_classifier']
  model_dir = tmp_path / 'model'
  shutil.copytree(os.path.join(recorded_lib.DATA, 'tf215_model_dir'), model_dir)
  make, kind, keys = _cases()['dnn_linear_combined_classifier']
  model = make(str(model_dir), keep_checkpoint_max=1)
  # TF 2.15's checkpoint, evaluated here: TF 2.15's metrics.
  evaluation, predictions = _evaluate_and_predict(model, 'dnn_linear_combined_classifier')
  _assert_matches(recorded['evaluate'], evaluation, 'evaluate')
  _assert_matches(recorded['predict'], predictions, 'predict')
  # Trained on from it, as TF 2.15 trained on: the same step, names and metrics.
  reference = _reference()
  model.train(reference.input_fn(kind, keys), steps=reference.STEPS)
  assert model.latest_checkpoint().endswith(f'model.ckpt-{2 * reference.STEPS}')
  assert sorted(model.get_variable_names()) == sorted(recorded['variables'])
  evaluation, _ = _evaluate_and_predict(model, 'dnn_linear_combined_classifier')
  _assert_matches(recorded['continued_evaluate'], evaluation, 'continued_evaluate')


def _signatures(export_dir):
  loaded = tf.saved_model.load(export_dir)
  return loaded, {name: {'inputs': sorted(f.structured_input_signature[1]),
                         'outputs': sorted(f.structured_outputs)}
                  for name, f in loaded.signatures.items()}


def _examples(keys=None):
  """The reference features as serialized tf.Examples."""
  examples = []
  features = _reference().features()
  for i in range(len(features['x1'])):
    feature = {}
    for key, values in features.items():
      value = values[i][0]
      if keys is None or key in keys:
        feature[key] = (
            tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
            if isinstance(value, str) else
            tf.train.Feature(float_list=tf.train.FloatList(value=[value])))
    examples.append(tf.train.Example(
        features=tf.train.Features(feature=feature)).SerializeToString())
  return tf.constant(examples)


@pytest.mark.parametrize('name', ['dnn_linear_combined_classifier'] + [
    pytest.param(name, marks=pytest.mark.slow)
    for name in ('linear_classifier', 'dnn_regressor', 'dnn_estimator_multi_head')])
def test_an_export_serves_tf215s_signatures(name, tmp_path):
  recorded = _recorded()[name]
  model = _train(name, tmp_path / 'model')
  exported = model.export_saved_model(
      str(tmp_path / 'export'), _reference().serving_receiver_fn(estimator.export))
  loaded, signatures = _signatures(exported.decode())
  assert signatures == recorded['signatures']
  # Served predictions are predict()'s, which are TF 2.15's; a binary head also
  # classifies (scores: the probabilities) and regresses (the logistic).
  served = loaded.signatures['predict'](examples=_examples())
  for i, expected in enumerate(recorded['predict']):
    for key, value in expected.items():
      served_key = key.replace('|', '/')
      if not isinstance(value, (str, list)) or _numeric(value):
        np.testing.assert_allclose(served[served_key][i], value, rtol=2e-5, atol=2e-6)
  if 'classification' in signatures and 'regression' in signatures:  # a binary head's
    classified = loaded.signatures['classification'](inputs=_examples())
    np.testing.assert_allclose(classified['scores'],
                               [p['probabilities'] for p in recorded['predict']], rtol=2e-5)
    assert classified['classes'].numpy()[0].tolist() == [b'0', b'1']
    regressed = loaded.signatures['regression'](inputs=_examples())
    np.testing.assert_allclose(np.ravel(regressed['outputs']),
                               [p['logistic'][0] for p in recorded['predict']], rtol=2e-5)


# ---- what is refused, and misuse ----


@pytest.mark.parametrize('name,fix', [
    ('LinearSDCA', "optimizer='Ftrl'"), ('RNNClassifier', 'dynamic_rnn'),
    ('RNNEstimator', 'dynamic_rnn'), ('BoostedTreesClassifier', 'Decision Forests'),
    ('BoostedTreesRegressor', 'Decision Forests')])
def test_premade_estimators_not_provided_name_the_fix(name, fix):
  with pytest.raises(AttributeError, match=f'no {name}: not provided.*{fix}'):
    getattr(canned, name)


def test_a_linear_sdca_optimizer_is_refused_with_the_fix():
  class LinearSDCA:  # what tf.estimator.experimental.LinearSDCA was
    pass
  with pytest.raises(ValueError, match="LinearSDCA is not provided.*optimizer='Ftrl'"):
    canned.LinearClassifier([tf.feature_column.numeric_column('x')],
                            optimizer=LinearSDCA())


_X = [tf.feature_column.numeric_column('x')]


@pytest.mark.parametrize('make,message', [
    (lambda: canned.DNNClassifier([4], _X, n_classes=1), 'n_classes=1'),
    (lambda: canned.DNNClassifier([], _X), r'hidden_units=\[\]'),
    (lambda: canned.DNNClassifier([4, 0], _X), 'positive'),
    (lambda: canned.DNNClassifier([4], []), 'feature_columns is empty'),
    (lambda: canned.DNNClassifier([4], ['x']), 'not a feature column'),
    (lambda: canned.DNNClassifier([4], _X, optimizer='Adamax'),
     "Unsupported optimizer name: 'Adamax'"),
    (lambda: canned.DNNClassifier([4], _X, optimizer=object()), 'is not an optimizer'),
    (lambda: canned.DNNClassifier([4], _X, dropout=1.5), 'dropout=1.5'),
    (lambda: canned.DNNClassifier([4], _X, label_vocabulary='ab'),
     'list or a tuple of strings. Given type: str'),
    (lambda: canned.LinearClassifier(_X, n_classes=3, label_vocabulary=['a', 'b']),
     'label_vocabulary has 2 items.*n_classes=3'),
    (lambda: canned.LinearRegressor(_X, loss_reduction='mean'),
     "Invalid loss_reduction: 'mean'"),
    (lambda: canned.LinearRegressor(_X, sparse_combiner='max'), "sparse_combiner='max'"),
    (lambda: canned.DNNLinearCombinedClassifier(), 'Either linear_feature_columns'),
    (lambda: canned.DNNLinearCombinedClassifier(dnn_feature_columns=_X),
     'dnn_hidden_units must be defined'),
    (lambda: canned.DNNEstimator('binary', [4], _X), 'is not a head'),
    (lambda: canned.MultiClassHead(2), 'n_classes must be an int > 2: 2'),
    (lambda: canned.MultiHead([canned.BinaryClassHead()]), 'must have name'),
    (lambda: canned.BinaryClassHead(thresholds=[1.5]), r'thresholds must be in \(0, 1\)'),
    (lambda: canned.DNNRegressor([4], _X, optimizer=tf.keras.optimizers.SGD(clipnorm=1.)),
     r"sets \['clipnorm'\]"),
])
def test_misuse_fails_at_construction_naming_the_value_and_fix(make, message):
  with pytest.raises(ValueError, match=message):
    make()


def test_v1_estimators_refuse_keras_optimizers_and_v1_reductions_are_checked():
  with pytest.raises(ValueError, match='takes a tf.compat.v1.train optimizer'):
    canned.v1.DNNClassifier([4], _X, optimizer=tf.keras.optimizers.Adagrad())
  with pytest.raises(ValueError, match="Invalid loss_reduction: 'sum_over_batch_size'"):
    canned.v1.LinearRegressor(_X, loss_reduction='sum_over_batch_size')
  with pytest.raises(ValueError, match="Unsupported optimizer name: 'Adamax'"):
    canned.v1.BaselineClassifier(optimizer='Adamax')


def test_a_v1_optimizer_and_an_optimizer_factory_train(tmp_path):
  reference = _reference()
  for i, optimizer in enumerate([tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                 lambda: tf.keras.optimizers.Adam(0.01)]):
    model = canned.LinearRegressor(_reference().columns()['wide'],
                                   model_dir=str(tmp_path / str(i)), optimizer=optimizer)
    model.train(reference.input_fn('real'), steps=3)
    assert model.latest_checkpoint().endswith('model.ckpt-3')
    names = model.get_variable_names()
    assert 'linear/linear_model/x1/weights' in names
    assert any(n.startswith('training/Adam/') for n in names) == (i == 1)
    assert 'iteration' not in names  # no Keras 3 optimizer variable in the graph


def test_a_head_in_a_model_fn_takes_sparse_string_labels(tmp_path):
  head = canned.MultiLabelHead(3, label_vocabulary=['a', 'b', 'c'], thresholds=[0.5])
  optimizer = tf.keras.optimizers.Adagrad(0.1)  # its settings; tfmon's graph applies them

  def model_fn(features, labels, mode):
    weights = tf.compat.v1.get_variable('w', [1, 3], initializer=tf.zeros_initializer())
    return head.create_estimator_spec(
        features, mode, tf.matmul(features['x'], weights), labels,
        optimizer=optimizer, trainable_variables=[weights])

  def input_fn():  # example 0 is 'a', example 1 'b' and 'c'
    labels = tf.SparseTensor(indices=[[0, 0], [1, 0], [1, 1]], values=['a', 'b', 'c'],
                             dense_shape=[2, 2])
    return {'x': tf.constant([[1.0], [2.0]])}, labels

  model = estimator.Estimator(model_fn, str(tmp_path))
  # Untrained, every probability is 0.5: 3 of the 6 labels are on.
  results = model.evaluate(input_fn, steps=1)
  assert sorted(results) == [
      'accuracy/positive_threshold_0.5', 'auc', 'auc_precision_recall', 'average_loss',
      'global_step', 'loss', 'precision/positive_threshold_0.5',
      'recall/positive_threshold_0.5']
  assert results['accuracy/positive_threshold_0.5'] == pytest.approx(0.5)
  assert results['average_loss'] == pytest.approx(np.log(2.0))
  assert results['auc'] == pytest.approx(0.5)
  model.train(input_fn, steps=3)
  assert {'training/Adagrad/w/accumulator', 'w'} <= set(model.get_variable_names())
  assert model.evaluate(input_fn, steps=1)['average_loss'] < np.log(2.0)


def test_a_v1_estimator_trains_a_head_with_its_v1_optimizer(tmp_path):
  reference = _reference()
  model = canned.v1.DNNEstimator(canned.BinaryClassHead(), [3],
                                 reference.columns()['dense'], model_dir=str(tmp_path),
                                 optimizer='SGD')
  model.train(reference.input_fn('binary'), steps=2)
  names = model.get_variable_names()
  # TF 1.x's slot-less SGD; the v2 head's keys.
  assert 'dnn/logits/kernel' in names and not any('SGD' in n for n in names)
  assert 'auc_precision_recall' in model.evaluate(reference.input_fn('binary', epochs=1))


def test_the_logit_fn_builders_build_the_premade_networks_in_a_model_fn(tmp_path):
  # TF 2.15's experimental builders, as model_fns of custom estimators used them.
  columns = [tf.feature_column.numeric_column('x', shape=[2])]

  def model_fn(features, labels, mode):
    with tf.compat.v1.variable_scope('dnn'):
      dnn = estimator.experimental.dnn_logit_fn_builder(
          1, [3], columns, tf.nn.relu, None, None, False)(features, mode)
    with tf.compat.v1.variable_scope('linear'):
      linear = estimator.experimental.linear_logit_fn_builder(1, columns)(features)
    loss = tf.reduce_mean(tf.square(dnn + linear - labels))
    return estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train
                                   .GradientDescentOptimizer(0.1).minimize(
                                       loss, tf.compat.v1.train.get_global_step()))

  def input_fn():
    return tf.data.Dataset.from_tensors(
        ({'x': np.ones([4, 2], np.float32)}, np.ones([4, 1], np.float32))).repeat()

  trained = estimator.Estimator(model_fn, str(tmp_path))
  trained.train(input_fn, steps=2)
  assert {'dnn/hiddenlayer_0/kernel', 'dnn/logits/bias',
          'linear/linear_model/x/weights',
          'linear/linear_model/bias_weights'} <= set(trained.get_variable_names())
