"""LinearClassifier, LinearRegressor, LinearEstimator: TF 2.15's linear premade
estimators.

The graph is TF 2.15's (`canned/linear.py`, `LinearModel` named
'linear/linear_model'): a weight per feature column
(`linear/linear_model/<column>/weights`, categorical columns weighted per
bucket and combined by `sparse_combiner`) and `linear/linear_model/bias_weights`,
built by the public `tf.compat.v1.feature_column.linear_model`, which makes the
same variables and sums. Default optimizer: Ftrl at rate 0.2, as TF 2.15's v2
estimators ran it. `LinearSDCA` is not provided (see BUILD_NOTES.md).
"""

import contextlib

import tensorflow as tf

from tfmon.estimator.canned import head as head_lib
from tfmon.estimator.canned import model_fn_utils as utils
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import ModeKeys

_LEARNING_RATE = 0.2
_SPARSE_COMBINERS = ('sum', 'mean', 'sqrtn')


def check_sparse_combiner(sparse_combiner):
  if sparse_combiner not in _SPARSE_COMBINERS:
    raise ValueError(f'sparse_combiner={sparse_combiner!r}: give one of '
                     f'{_SPARSE_COMBINERS}.')
  return sparse_combiner


def check_optimizer(optimizer):
  if type(optimizer).__name__ == 'LinearSDCA':
    raise ValueError(
        "LinearSDCA is not provided (see BUILD_NOTES.md): use optimizer='Ftrl' (the "
        'default), which trains the same linear model.')
  return optimizer


def _fraction_of_zero(variables):
  sizes = [tf.cast(tf.size(v), tf.float32) for v in variables]
  zeros = [tf.math.zero_fraction(v) * size for v, size in zip(variables, sizes)]
  return tf.math.divide_no_nan(tf.math.add_n(zeros), tf.math.add_n(sizes))


def linear_logits(features, units, feature_columns, sparse_combiner, scope='linear'):
  """TF 2.15's linear model in the current graph: `(logits, trainable_variables)`,
  in variable scope `scope` (None: the current one, which
  tf.compat.v1.estimator's linear model entered with a partitioner itself)."""
  columns_to_variables = {}
  with utils.new_variables() as variables, (
      tf.compat.v1.variable_scope(scope) if scope else contextlib.nullcontext()):
    logits = tf.compat.v1.feature_column.linear_model(
        features, list(feature_columns), units=units, sparse_combiner=sparse_combiner,
        cols_to_vars=columns_to_variables)
  bias = columns_to_variables['bias'][0]
  if units > 1:
    tf.compat.v1.summary.histogram('bias', bias)
  else:
    tf.compat.v1.summary.scalar('bias', bias[0])
  weights = [v for v in variables if v is not bias]
  if weights:
    tf.compat.v1.summary.scalar('fraction_of_zero_weights', _fraction_of_zero(weights))
  return logits, variables


def _linear_model_fn(features, labels, mode, head, feature_columns, make_optimizer,
                     sparse_combiner):
  utils.check_features(features)
  logits, variables = linear_logits(features, head.logits_dimension, feature_columns,
                                    sparse_combiner)
  return head.create_estimator_spec(
      features=features, mode=mode, labels=labels, logits=logits,
      optimizer=make_optimizer() if mode == ModeKeys.TRAIN else None,
      trainable_variables=variables)


class LinearEstimator(Estimator):
  """A linear model on feature columns with any head:
  `tf.estimator.LinearEstimator` of TF 2.15.

  Args:
    head: A head (`tfmon.estimator.canned.BinaryClassHead`, ...).
    feature_columns: `tf.feature_column` columns of the model's input.
    model_dir: Where checkpoints go (a TF 2.15 model_dir continues here).
    optimizer: 'Ftrl' (default, rate 0.2), 'Adagrad', 'Adam', 'RMSProp', 'SGD'
      (at rate 0.2), a tf.keras optimizer instance, or a callable returning one.
    config: A `tfmon.estimator.RunConfig`.
    sparse_combiner: How a multivalent categorical column's weights combine:
      'sum' (default), 'mean' or 'sqrtn'.
    warm_start_from: As for `Estimator`.

  Raises:
    ValueError: a bad head, feature column, optimizer (LinearSDCA among them)
      or sparse_combiner, named with the fix.
  """

  def __init__(self, head, feature_columns, model_dir=None, optimizer='Ftrl',
               config=None, sparse_combiner='sum', warm_start_from=None):
    self._build(utils.check_estimator_head(head), feature_columns, model_dir,
                optimizer, config, warm_start_from, sparse_combiner)

  def _build(self, head, feature_columns, model_dir, optimizer, config,
             warm_start_from, sparse_combiner):
    feature_columns = utils.check_feature_columns(feature_columns)
    make_optimizer = utils.optimizer_factory(check_optimizer(optimizer), _LEARNING_RATE)
    sparse_combiner = check_sparse_combiner(sparse_combiner)

    def model_fn(features, labels, mode):
      return _linear_model_fn(features, labels, mode, head, feature_columns,
                              make_optimizer, sparse_combiner)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class LinearClassifier(LinearEstimator):
  """A linear classifier: `tf.estimator.LinearClassifier` of TF 2.15.

  Args:
    feature_columns, model_dir, optimizer, config, warm_start_from,
      sparse_combiner: As for `LinearEstimator`.
    n_classes: The number of classes (>= 2; 2 is binary classification).
    weight_column: A feature name or numeric column of example weights.
    label_vocabulary: The class names, when labels are strings.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None,
               warm_start_from=None, loss_reduction='sum_over_batch_size',
               sparse_combiner='sum'):
    head = head_lib.binary_or_multi_class_head(n_classes, weight_column,
                                               label_vocabulary, loss_reduction)
    self._build(head, feature_columns, model_dir, optimizer, config, warm_start_from,
                sparse_combiner)


class LinearRegressor(LinearEstimator):
  """A linear regressor: `tf.estimator.LinearRegressor` of TF 2.15.

  Args:
    feature_columns, model_dir, optimizer, config, warm_start_from,
      sparse_combiner: As for `LinearEstimator`.
    label_dimension: Values per example.
    weight_column: A feature name or numeric column of example weights.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Ftrl', config=None, warm_start_from=None,
               loss_reduction='sum_over_batch_size', sparse_combiner='sum'):
    head = head_lib.RegressionHead(label_dimension=label_dimension,
                                   weight_column=weight_column,
                                   loss_reduction=loss_reduction)
    self._build(head, feature_columns, model_dir, optimizer, config, warm_start_from,
                sparse_combiner)
