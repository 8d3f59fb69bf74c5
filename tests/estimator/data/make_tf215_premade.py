"""Records what TF 2.15's premade estimators do, for tests/estimator/test_premade.py.

Run it with TensorFlow 2.15 and tensorflow-estimator 2.15 (not installed in CI):

  python -m venv /tmp/tf215 && /tmp/tf215/bin/pip install tensorflow-cpu==2.15.1 \
      tensorflow-estimator==2.15.0
  /tmp/tf215/bin/python tests/estimator/data/make_tf215_premade.py

It trains each case below `STEPS` steps from `RunConfig(tf_random_seed=SEED)` on
the tiny data of `features()`/`labels()` (no shuffling), and writes
`tf215_premade.json`: per case, the variables of the checkpoint (names and
values), `evaluate()`'s results, `predict()`'s outputs and the serving
signatures of `export_saved_model`, and the constructors' parameters. For `CONTINUED`, it also keeps its
model_dir (`tf215_model_dir/`: the checkpoint of step STEPS, a few KB) and
records the evaluation after TF 2.15 trained it STEPS more steps, which
tfmon must reproduce by continuing that directory.

The cases are written against a namespace (`tf.estimator` here, tfmon's in the
test), so both sides build the same estimators from this one definition.
"""

import inspect
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

SEED = 42
STEPS = 5
BATCH = 4
CONTINUED = 'dnn_linear_combined_classifier'
HERE = os.path.dirname(os.path.abspath(__file__))


def features():
  """Eight examples: two numbers, a color, a weight."""
  return {'x1': np.array([[0.5], [1.0], [-1.0], [2.0], [0.0], [-0.5], [1.5], [-2.0]],
                         np.float32),
          'x2': np.array([[1.0], [-1.0], [0.5], [0.0], [2.0], [-2.0], [0.25], [1.5]],
                         np.float32),
          'color': np.array([['r'], ['g'], ['b'], ['r'], ['g'], ['b'], ['r'], ['g']]),
          'w': np.array([[1.0], [2.0], [0.5], [1.0], [1.5], [1.0], [0.5], [2.0]],
                        np.float32)}


def labels(kind):
  return {
      'binary': np.array([[1], [0], [0], [1], [0], [0], [1], [1]], np.int64),
      'classes': np.array([[0], [1], [2], [0], [1], [2], [0], [1]], np.int64),
      'names': np.array([['a'], ['b'], ['c'], ['a'], ['b'], ['c'], ['a'], ['b']]),
      'yes_no': np.array([['yes'], ['no'], ['no'], ['yes'], ['no'], ['yes'], ['yes'],
                          ['no']]),
      'real': np.array([[1.5], [-0.5], [0.0], [2.5], [1.0], [-1.0], [2.0], [-2.5]],
                       np.float32),
      'probability': np.array([[0.9], [0.1], [0.3], [1.0], [0.5], [0.0], [0.8], [0.6]],
                              np.float32),
      'counts': np.array([[2.], [0.], [1.], [4.], [1.], [0.], [3.], [1.]], np.float32),
      'indicators': np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1], [1, 1, 0],
                              [0, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 1]], np.int64),
  }[kind]


def columns():
  fc = tf.feature_column
  color = fc.categorical_column_with_vocabulary_list('color', ['r', 'g', 'b'])
  x2_buckets = fc.bucketized_column(fc.numeric_column('x2'), [-1.0, 0.0, 1.0])
  return {'dense': [fc.numeric_column('x1'), fc.numeric_column('x2'),
                    fc.embedding_column(color, 2)],
          'wide': [fc.numeric_column('x1'), color, x2_buckets,
                   fc.crossed_column([color, x2_buckets], 7)]}


def cases(estimator, keras_optimizers, run_config, estimator_v1):
  """name -> (make(model_dir), label kind, feature keys or None) for every case.

  The baselines read one feature (and the weight): TF 2.15's
  BaselineClassifier, given several, failed at initialization (its bias was
  made under the batch-size checks, which read the input).

  Args:
    estimator: The namespace of the premade estimators and heads
      (`tf.estimator`, or tfmon's).
    keras_optimizers: Where `Adagrad` instances come from
      (`tf.keras.optimizers.legacy` under TF 2.15, `tf.keras.optimizers` after).
    run_config: `RunConfig` of that side.
    estimator_v1: The namespace of tf.compat.v1.estimator's premade estimators
      (`v1_` cases).
  """
  dense, wide = columns()['dense'], columns()['wide']

  def config(**kwargs):
    return run_config(tf_random_seed=SEED, **kwargs)

  def case(cls, kind, keys=None, **kwargs):
    return (lambda model_dir, **more: cls(model_dir=model_dir, config=config(**more),
                                          **kwargs)), kind, keys

  return {
      'dnn_classifier': case(estimator.DNNClassifier, 'binary', hidden_units=[4, 3],
                             feature_columns=dense),
      'dnn_classifier_vocabulary': case(
          estimator.DNNClassifier, 'names', hidden_units=[4], feature_columns=dense,
          n_classes=3, label_vocabulary=['a', 'b', 'c'], optimizer='Adam'),
      'dnn_regressor': case(estimator.DNNRegressor, 'real', hidden_units=[3],
                            feature_columns=dense, weight_column='w', batch_norm=True,
                            optimizer='RMSProp'),
      'linear_classifier': case(estimator.LinearClassifier, 'classes',
                                feature_columns=wide, n_classes=3),
      'linear_regressor': case(estimator.LinearRegressor, 'real', feature_columns=wide,
                               optimizer=keras_optimizers.Adagrad(learning_rate=0.1),
                               sparse_combiner='mean'),
      'dnn_linear_combined_classifier': case(
          estimator.DNNLinearCombinedClassifier, 'binary', linear_feature_columns=wide,
          dnn_feature_columns=dense, dnn_hidden_units=[3]),
      'dnn_linear_combined_regressor': case(
          estimator.DNNLinearCombinedRegressor, 'real', linear_feature_columns=wide,
          dnn_feature_columns=dense, dnn_hidden_units=[3], dnn_optimizer='SGD'),
      'baseline_classifier': case(estimator.BaselineClassifier, 'binary', ['x1', 'w'],
                                  weight_column='w'),
      'baseline_regressor': case(estimator.BaselineRegressor, 'real', ['x1'],
                                 optimizer='SGD'),
      'dnn_estimator_multi_label': case(
          estimator.DNNEstimator, 'indicators',
          head=estimator.MultiLabelHead(3, classes_for_class_based_metrics=[1]),
          hidden_units=[3], feature_columns=dense),
      'linear_estimator_poisson': case(estimator.LinearEstimator, 'counts',
                                       head=estimator.PoissonRegressionHead(),
                                       feature_columns=wide),
      'baseline_estimator_logistic': case(estimator.BaselineEstimator, 'probability',
                                          ['x1'], head=estimator.LogisticRegressionHead()),
      'linear_estimator_binary_thresholds': case(
          estimator.LinearEstimator, 'yes_no',
          head=estimator.BinaryClassHead(
              weight_column=tf.feature_column.numeric_column('w'), thresholds=[0.3, 0.7],
              label_vocabulary=['no', 'yes']),
          feature_columns=wide),
      'dnn_classifier_dropout': case(estimator.DNNClassifier, 'binary', hidden_units=[5],
                                     feature_columns=dense, dropout=0.4,
                                     optimizer='Ftrl'),
      'dnn_classifier_momentum': case(
          estimator.DNNClassifier, 'binary', hidden_units=[3], feature_columns=dense,
          optimizer=keras_optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True)),
      'linear_classifier_rmsprop_momentum': case(
          estimator.LinearClassifier, 'binary', feature_columns=wide,
          optimizer=keras_optimizers.RMSprop(learning_rate=0.05, momentum=0.5,
                                             centered=True)),
      'dnn_estimator_multi_head': case(
          estimator.DNNEstimator, 'multi_head',
          head=estimator.MultiHead([estimator.BinaryClassHead(name='clicked'),
                                    estimator.RegressionHead(name='spent')]),
          hidden_units=[3], feature_columns=dense),
      'v1_dnn_classifier': case(estimator_v1.DNNClassifier, 'binary', hidden_units=[4, 3],
                                feature_columns=dense, batch_norm=True),
      'v1_dnn_classifier_vocabulary': case(
          estimator_v1.DNNClassifier, 'names', hidden_units=[4], feature_columns=dense,
          n_classes=3, label_vocabulary=['a', 'b', 'c'], optimizer='Adam',
          weight_column='w'),
      'v1_dnn_regressor': case(
          estimator_v1.DNNRegressor, 'real', hidden_units=[3], feature_columns=dense,
          optimizer=lambda: tf.compat.v1.train.RMSPropOptimizer(0.01),
          loss_reduction='weighted_sum_over_batch_size'),
      'v1_linear_classifier': case(estimator_v1.LinearClassifier, 'binary',
                                   feature_columns=wide, weight_column='w',
                                   optimizer=None),
      'v1_linear_regressor': case(estimator_v1.LinearRegressor, 'real',
                                  feature_columns=wide,
                                  optimizer=tf.compat.v1.train.FtrlOptimizer(0.1),
                                  loss_reduction='weighted_mean'),
      'v1_dnn_linear_combined_classifier': case(
          estimator_v1.DNNLinearCombinedClassifier, 'binary', linear_feature_columns=wide,
          dnn_feature_columns=dense, dnn_hidden_units=[3]),
      'v1_dnn_linear_combined_regressor': case(
          estimator_v1.DNNLinearCombinedRegressor, 'real', linear_feature_columns=wide,
          dnn_feature_columns=dense, dnn_hidden_units=[3], dnn_optimizer='SGD'),
      'v1_baseline_classifier': case(estimator_v1.BaselineClassifier, 'binary',
                                     ['x1', 'w'], weight_column='w'),
      'v1_baseline_regressor': case(estimator_v1.BaselineRegressor, 'real', ['x1']),
  }


def input_fn(kind, keys=None, epochs=None, with_labels=True):
  def make():
    x = {k: v for k, v in features().items() if keys is None or k in keys}
    if not with_labels:
      return tf.data.Dataset.from_tensor_slices(x).batch(BATCH)
    y = ({'clicked': labels('binary'), 'spent': labels('real')} if kind == 'multi_head'
         else labels(kind))
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).repeat(epochs)
  return make


def serving_receiver_fn(export):
  """Serialized tf.Examples of the features (`export`: the side's
  `estimator.export`), as TF's serving examples were fed."""
  spec = tf.feature_column.make_parse_example_spec(
      columns()['dense'] + columns()['wide'])
  return export.build_parsing_serving_input_receiver_fn(spec)


def _plain(value):
  """JSON-ready: numpy values as lists, bytes as text, tuple keys joined by '|'."""
  if isinstance(value, dict):
    return {('|'.join(k) if isinstance(k, tuple) else k): _plain(v)
            for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  if isinstance(value, bytes):
    return value.decode()
  if isinstance(value, np.ndarray):
    return _plain(value.tolist())
  if isinstance(value, np.generic):
    return value.item()
  return value


def _signatures(export_dir):
  loaded = tf.saved_model.load(export_dir)
  return {name: {'inputs': sorted(function.structured_input_signature[1]),
                 'outputs': sorted(function.structured_outputs)}
          for name, function in loaded.signatures.items()}


def _record(name, make, kind, keys, work):
  model_dir = os.path.join(work, name)
  model = make(model_dir, keep_checkpoint_max=1)
  model.train(input_fn(kind, keys), steps=STEPS)
  reader = tf.train.load_checkpoint(model.latest_checkpoint())
  record = {
      'variables': {key: _plain(reader.get_tensor(key))
                    for key in sorted(reader.get_variable_to_shape_map())},
      'evaluate': _plain(model.evaluate(input_fn(kind, keys, epochs=1))),
      'predict': _plain(list(model.predict(input_fn(kind, keys, with_labels=False)))),
      'signatures': _signatures(model.export_saved_model(
          os.path.join(work, name + '_export'),
          serving_receiver_fn(tf.estimator.export)).decode()),
  }
  if name == CONTINUED:
    target = os.path.join(HERE, 'tf215_model_dir')
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    prefix = os.path.basename(model.latest_checkpoint())
    for file in os.listdir(model_dir):
      if file.startswith(prefix + '.') and not file.endswith('.meta'):  # 400 KB
        shutil.copy(os.path.join(model_dir, file), target)
    with open(os.path.join(target, 'checkpoint'), 'w') as f:  # relative paths
      f.write(f'model_checkpoint_path: "{prefix}"\n'
              f'all_model_checkpoint_paths: "{prefix}"\n')
    model.train(input_fn(kind, keys), steps=STEPS)
    record['continued_evaluate'] = _plain(model.evaluate(input_fn(kind, keys, epochs=1)))
  return record


ESTIMATORS = ('BaselineClassifier', 'BaselineEstimator', 'BaselineRegressor',
              'DNNClassifier', 'DNNEstimator', 'DNNLinearCombinedClassifier',
              'DNNLinearCombinedEstimator', 'DNNLinearCombinedRegressor', 'DNNRegressor',
              'LinearClassifier', 'LinearEstimator', 'LinearRegressor')
HEADS = ('BinaryClassHead', 'LogisticRegressionHead', 'MultiClassHead', 'MultiHead',
         'MultiLabelHead', 'PoissonRegressionHead', 'RegressionHead')


def constructor(cls):
  """`[name, default]` of each parameter of `cls`'s constructor (functions by name)."""
  return [[p.name, p.default.__name__ if callable(p.default) else repr(p.default)]
          for p in inspect.signature(cls.__init__).parameters.values()][1:]


def main():
  assert tf.__version__.startswith('2.15'), 'run this with TensorFlow 2.15'
  work = tempfile.mkdtemp()
  records = {'tensorflow': tf.__version__, 'seed': SEED, 'steps': STEPS,
             'constructors': {name: constructor(getattr(tf.estimator, name))
                              for name in ESTIMATORS + HEADS},
             'v1_constructors': {name: constructor(getattr(tf.compat.v1.estimator, name))
                                 for name in ESTIMATORS}}
  for name, (make, kind, keys) in cases(tf.estimator, tf.keras.optimizers.legacy,
                                        tf.estimator.RunConfig,
                                        tf.compat.v1.estimator).items():
    records[name] = _record(name, make, kind, keys, work)
  with open(os.path.join(HERE, 'tf215_premade.json'), 'w') as f:
    json.dump(records, f, indent=1, sort_keys=True)
  shutil.rmtree(work)


if __name__ == '__main__':
  main()
