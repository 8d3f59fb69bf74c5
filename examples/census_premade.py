r"""TensorFlow's census wide-and-deep program (official/r1/wide_deep) on tfmon.

A premade `DNNLinearCombinedClassifier` predicts whether income exceeds $50K
from census rows: the linear ("wide") part reads bucketized ages, vocabulary
and hash-bucket categoricals and their crosses; the DNN ("deep") part numbers,
one-hot categoricals and an embedding. Train, evaluate, repeat; then predict
and export for serving, as the TF 1.x/2.x program did. Its changes for TF
2.16+: `tf.estimator` -> tfmon's premade estimators, and the data: the program
downloaded adult.data; this writes synthetic rows of the same columns (the
label a noisy rule of education, age, hours, gains and marriage) so it runs
without the network.

  python examples/census_premade.py --model_dir /tmp/census_model
"""

import csv
import os

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from tfmon import estimator

_MODEL_DIR = flags.DEFINE_string('model_dir', '/tmp/census_model',
                                 'Where the Estimator keeps its checkpoints.')
_DATA_DIR = flags.DEFINE_string('data_dir', None,
                                'Where the CSV files go (default: model_dir/data).')
_TRAIN_EPOCHS = flags.DEFINE_integer('train_epochs', 4, 'Passes over the training data.')
_EPOCHS_BETWEEN_EVALS = flags.DEFINE_integer('epochs_between_evals', 2,
                                             'Passes between evaluations.')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 40, 'Examples per batch.')

_CSV_COLUMNS = ['age', 'workclass', 'fnlwgt', 'education', 'education_num',
                'marital_status', 'occupation', 'relationship', 'race', 'gender',
                'capital_gain', 'capital_loss', 'hours_per_week', 'native_country',
                'income_bracket']
_CSV_COLUMN_DEFAULTS = [[0], [''], [0], [''], [0], [''], [''], [''], [''], [''],
                        [0], [0], [0], [''], ['']]
_EDUCATION = ['Bachelors', 'HS-grad', '11th', 'Masters', '9th', 'Some-college',
              'Assoc-acdm', 'Assoc-voc', '7th-8th', 'Doctorate', 'Prof-school',
              '5th-6th', '10th', '1st-4th', 'Preschool', '12th']
_YEARS = dict(zip(_EDUCATION, [13, 9, 7, 14, 5, 10, 12, 11, 4, 16, 15, 3, 6, 2, 1, 8]))
_MARITAL = ['Married-civ-spouse', 'Divorced', 'Married-spouse-absent', 'Never-married',
            'Separated', 'Married-AF-spouse', 'Widowed']
_RELATIONSHIP = ['Husband', 'Not-in-family', 'Wife', 'Own-child', 'Unmarried',
                 'Other-relative']
_WORKCLASS = ['Self-emp-not-inc', 'Private', 'State-gov', 'Federal-gov', 'Local-gov',
              '?', 'Self-emp-inc', 'Without-pay', 'Never-worked']
_OCCUPATION = ['Tech-support', 'Craft-repair', 'Other-service', 'Sales',
               'Exec-managerial', 'Prof-specialty', 'Handlers-cleaners',
               'Machine-op-inspct', 'Adm-clerical', 'Farming-fishing']
_HASH_BUCKET_SIZE = 1000


def write_census_csv(path, rows, seed):
  """Writes `rows` synthetic census rows (adult.data's columns, no header)."""
  rng = np.random.default_rng(seed)
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    for _ in range(rows):
      education = rng.choice(_EDUCATION)
      age = int(rng.integers(17, 80))
      marital = rng.choice(_MARITAL)
      hours = int(np.clip(rng.normal(40, 12), 1, 99))
      gain = int(rng.choice([0] * 10 + [3000, 7000]))
      score = (0.45 * (_YEARS[education] - 10) + 0.05 * (min(age, 60) - 38)
               + 0.04 * (hours - 40) + gain / 5000.0
               + (1.2 if marital.startswith('Married') else -0.8) + rng.normal(0, 0.7))
      writer.writerow([age, rng.choice(_WORKCLASS), int(rng.integers(20000, 500000)),
                       education, _YEARS[education], marital, rng.choice(_OCCUPATION),
                       rng.choice(_RELATIONSHIP), 'White', rng.choice(['Male', 'Female']),
                       gain, int(rng.choice([0, 0, 0, 1500])), hours, 'United-States',
                       '>50K' if score > 0.8 else '<=50K'])


def build_model_columns():
  """The wide and deep feature columns (the program's own)."""
  fc = tf.feature_column
  age = fc.numeric_column('age')
  education_num = fc.numeric_column('education_num')
  capital_gain = fc.numeric_column('capital_gain')
  capital_loss = fc.numeric_column('capital_loss')
  hours_per_week = fc.numeric_column('hours_per_week')
  education = fc.categorical_column_with_vocabulary_list('education', _EDUCATION)
  marital_status = fc.categorical_column_with_vocabulary_list('marital_status', _MARITAL)
  relationship = fc.categorical_column_with_vocabulary_list('relationship', _RELATIONSHIP)
  workclass = fc.categorical_column_with_vocabulary_list('workclass', _WORKCLASS)
  # To show an example of hashing:
  occupation = fc.categorical_column_with_hash_bucket(
      'occupation', hash_bucket_size=_HASH_BUCKET_SIZE)
  # Transformations.
  age_buckets = fc.bucketized_column(
      age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
  # Wide columns and deep columns.
  base_columns = [education, marital_status, relationship, workclass, occupation,
                  age_buckets]
  crossed_columns = [
      fc.crossed_column(['education', 'occupation'], hash_bucket_size=_HASH_BUCKET_SIZE),
      fc.crossed_column([age_buckets, 'education', 'occupation'],
                        hash_bucket_size=_HASH_BUCKET_SIZE)]
  wide_columns = base_columns + crossed_columns
  deep_columns = [
      age, education_num, capital_gain, capital_loss, hours_per_week,
      fc.indicator_column(workclass), fc.indicator_column(education),
      fc.indicator_column(marital_status), fc.indicator_column(relationship),
      # To show an example of embedding
      fc.embedding_column(occupation, dimension=8)]
  return wide_columns, deep_columns


def build_estimator(model_dir):
  """The wide-and-deep classifier, as the program built it, but with faster
  optimizers: it trained 32,000 steps at the default rates, this a few hundred.
  They are given as callables, as TF 2.15 needed them (an instance failed in
  the second `train`)."""
  wide_columns, deep_columns = build_model_columns()
  run_config = estimator.RunConfig(tf_random_seed=7, save_checkpoints_steps=None,
                                   save_checkpoints_secs=600, log_step_count_steps=50)
  return estimator.DNNLinearCombinedClassifier(
      model_dir=model_dir, linear_feature_columns=wide_columns,
      linear_optimizer=lambda: tf.keras.optimizers.Ftrl(learning_rate=0.1),
      dnn_feature_columns=deep_columns, dnn_hidden_units=[100, 75, 50, 25],
      dnn_optimizer=lambda: tf.keras.optimizers.Adagrad(learning_rate=0.05),
      config=run_config)


def input_fn(data_file, num_epochs, shuffle, batch_size):
  """Reads the CSV as the program did: TextLineDataset, decode_csv, batch."""
  def parse_csv(value):
    columns = tf.io.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
    features = dict(zip(_CSV_COLUMNS, columns))
    labels = features.pop('income_bracket')
    return features, tf.equal(labels, '>50K')

  def make():
    dataset = tf.data.TextLineDataset(data_file)
    if shuffle:
      dataset = dataset.shuffle(buffer_size=1000, seed=7)
    return dataset.map(parse_csv).repeat(num_epochs).batch(batch_size)
  return make


def main(argv):
  del argv
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  data_dir = _DATA_DIR.value or os.path.join(_MODEL_DIR.value, 'data')
  os.makedirs(data_dir, exist_ok=True)
  train_file = os.path.join(data_dir, 'adult.data')
  test_file = os.path.join(data_dir, 'adult.test')
  write_census_csv(train_file, 1200, seed=1)
  write_census_csv(test_file, 400, seed=2)

  model = build_estimator(_MODEL_DIR.value)
  for n in range(_TRAIN_EPOCHS.value // _EPOCHS_BETWEEN_EVALS.value):
    model.train(input_fn=input_fn(train_file, _EPOCHS_BETWEEN_EVALS.value, True,
                                  _BATCH_SIZE.value))
    results = model.evaluate(input_fn=input_fn(test_file, 1, False, _BATCH_SIZE.value))
    print(f'Results at epoch {(n + 1) * _EPOCHS_BETWEEN_EVALS.value}')
    print('-' * 60)
    for key in sorted(results):
      print(f'{key}: {results[key]}')

  predictions = model.predict(input_fn=lambda: input_fn(test_file, 1, False, 5)().map(
      lambda features, labels: features).take(1))
  for prediction in predictions:
    print(f"Predicted {prediction['classes'][0].decode()} with probability "
          f"{prediction['probabilities'][1]:.3f} of >50K")

  wide_columns, deep_columns = build_model_columns()
  feature_spec = tf.feature_column.make_parse_example_spec(wide_columns + deep_columns)
  export_dir = model.export_saved_model(
      os.path.join(_MODEL_DIR.value, 'export'),
      estimator.export.build_parsing_serving_input_receiver_fn(feature_spec))
  print(f'Exported to {export_dir.decode()}')


if __name__ == '__main__':
  app.run(main)
