"""classifier_parse_example_spec and regressor_parse_example_spec, as TF 2.15's."""

import pytest
import tensorflow as tf

from tfmon import estimator

_COLUMNS = [tf.feature_column.numeric_column('age'),
            tf.feature_column.categorical_column_with_vocabulary_list('job', ['a', 'b'])]


def test_classifier_spec_adds_the_label_and_weight():
  spec = estimator.classifier_parse_example_spec(
      _COLUMNS, label_key='label', label_default=0, weight_column='w')
  assert spec == {
      'age': tf.io.FixedLenFeature((1,), tf.float32),
      'job': tf.io.VarLenFeature(tf.string),
      'label': tf.io.FixedLenFeature((1,), tf.int64, 0),
      'w': tf.io.FixedLenFeature((1,), tf.float32)}


def test_regressor_spec_has_the_labels_dimension():
  spec = estimator.regressor_parse_example_spec(_COLUMNS, 'y', label_dimension=3)
  assert spec['y'] == tf.io.FixedLenFeature((3,), tf.float32)


def test_a_label_or_weight_among_the_features_is_refused():
  with pytest.raises(ValueError, match='label should not be used as feature'):
    estimator.classifier_parse_example_spec(_COLUMNS, label_key='age')
  with pytest.raises(ValueError, match='weight_column should not be used as feature'):
    estimator.regressor_parse_example_spec(_COLUMNS, 'y', weight_column='age')
  with pytest.raises(ValueError, match='weight_column should be an instance of '
                     'tf.feature_column.numeric_column'):
    estimator.regressor_parse_example_spec(_COLUMNS, 'y', weight_column=_COLUMNS[1])
