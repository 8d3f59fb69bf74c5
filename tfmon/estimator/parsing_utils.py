"""classifier_parse_example_spec and regressor_parse_example_spec, as tf.estimator's:
the features' parsing spec (`tf.feature_column.make_parse_example_spec`) with
the label's, and the weight column's, added."""

import tensorflow as tf


def classifier_parse_example_spec(feature_columns, label_key, label_dtype=tf.int64,
                                  label_default=None, weight_column=None):
  """The parsing spec of tf.Examples for a classifier: features, label, weight.

  Args:
    feature_columns: The model's feature columns (`tf.feature_column`).
    label_key: The label's key in the tf.Example.
    label_dtype: `tf.int64` for class ids, `tf.string` for a label vocabulary.
    label_default: The label's value when an example lacks it (None: required).
    weight_column: A key, or a `tf.feature_column.numeric_column`, of the
      examples' weights.

  Returns:
    A dict of key to `tf.io.FixedLenFeature` or `tf.io.VarLenFeature`; the
    label's is `FixedLenFeature((1,), label_dtype, label_default)`.

  Raises:
    ValueError: the label or weight among the features, or a weight column
      that is not a numeric column.
  """
  return _with_label_and_weight(
      tf.feature_column.make_parse_example_spec(feature_columns), label_key,
      tf.io.FixedLenFeature((1,), label_dtype, label_default), weight_column)


def regressor_parse_example_spec(feature_columns, label_key, label_dtype=tf.float32,
                                 label_default=None, label_dimension=1,
                                 weight_column=None):
  """The parsing spec of tf.Examples for a regressor: features, label, weight.

  As `classifier_parse_example_spec`, the label's spec being
  `FixedLenFeature((label_dimension,), label_dtype, label_default)`.
  """
  return _with_label_and_weight(
      tf.feature_column.make_parse_example_spec(feature_columns), label_key,
      tf.io.FixedLenFeature((label_dimension,), label_dtype, label_default),
      weight_column)


def _with_label_and_weight(parsing_spec, label_key, label_spec, weight_column):
  if label_key in parsing_spec:
    raise ValueError('label should not be used as feature. label_key: '
                     f'{label_key}, features: {parsing_spec.keys()}')
  parsing_spec[label_key] = label_spec
  if weight_column is None:
    return parsing_spec
  if isinstance(weight_column, str):
    weight_column = tf.feature_column.numeric_column(weight_column)
  # The class is not public: tf.feature_column.numeric_column makes it.
  if type(weight_column).__name__ != 'NumericColumn':
    raise ValueError('weight_column should be an instance of '
                     'tf.feature_column.numeric_column. Given type: '
                     f'{type(weight_column)} value: {weight_column}')
  if weight_column.key in parsing_spec:
    raise ValueError('weight_column should not be used as feature. weight_column: '
                     f'{weight_column.key}, features: {parsing_spec.keys()}')
  parsing_spec.update(weight_column.parse_example_spec)
  return parsing_spec
