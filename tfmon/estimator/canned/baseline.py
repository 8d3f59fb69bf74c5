"""BaselineClassifier, BaselineRegressor, BaselineEstimator: TF 2.15's models
that ignore the features and learn one bias (`baseline/bias`): the class prior
or the mean label, a yardstick for real models. Default optimizer: Ftrl at
rate 0.3, as TF 2.15's v2 estimators ran it.
"""

import tensorflow as tf

from tfmon.estimator.canned import head as head_lib
from tfmon.estimator.canned import model_fn_utils as utils
from tfmon.estimator.canned import optimizers
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import ModeKeys

_LEARNING_RATE = 0.3


def _weight_column_key(weight_column):
  if weight_column is None or isinstance(weight_column, str):
    return weight_column
  if type(weight_column).__name__ != 'NumericColumn':
    raise TypeError(f'weight_column must be a feature name or a '
                    f'tf.feature_column.numeric_column; given '
                    f'{type(weight_column).__name__}.')
  return weight_column.key


def baseline_logits(features, units, weight_column):
  """The bias `baseline/bias`, one row per example: the logits."""
  utils.check_features(features)
  weight_key = _weight_column_key(weight_column)
  # The batch size is any feature's first dimension; all must agree.
  sizes = [tf.shape(value)[0] for key, value in sorted(features.items())
           if key != weight_key]
  if not sizes:
    raise ValueError('features holds no feature (the weight column aside): '
                     'input_fn must return one to size the batch.')
  checks = [tf.compat.v1.debugging.assert_equal(sizes[0], size) for size in sizes[1:]]
  with tf.control_dependencies(checks):
    with tf.compat.v1.variable_scope('baseline'):
      bias = tf.compat.v1.get_variable('bias', [units], tf.float32,
                                       tf.compat.v1.zeros_initializer())
      return bias * tf.ones([sizes[0], units])


def _baseline_model_fn(features, labels, mode, head, make_optimizer, weight_column):
  logits = baseline_logits(features, head.logits_dimension, weight_column)

  def train_op_fn(loss):
    return optimizers.minimize(make_optimizer(), loss,
                               tf.compat.v1.trainable_variables('baseline/'),
                               tf.compat.v1.train.get_or_create_global_step())

  return head.create_estimator_spec(
      features=features, mode=mode, labels=labels, logits=logits,
      train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)


class BaselineEstimator(Estimator):
  """A bias-only model with any head: `tf.estimator.BaselineEstimator` of TF 2.15.

  Args:
    head: A head (`tfmon.estimator.canned.RegressionHead`, ...).
    model_dir: Where checkpoints go.
    optimizer: 'Ftrl' (default, rate 0.3) or another name, a tf.keras optimizer
      instance, or a callable returning one.
    config: A `tfmon.estimator.RunConfig`.

  Raises:
    ValueError: a bad head or optimizer, named with the fix.
  """

  def __init__(self, head, model_dir=None, optimizer='Ftrl', config=None):
    self._build(utils.check_estimator_head(head), model_dir, optimizer, config, None)

  def _build(self, head, model_dir, optimizer, config, weight_column):
    make_optimizer = utils.optimizer_factory(optimizer, _LEARNING_RATE)
    _weight_column_key(weight_column)

    def model_fn(features, labels, mode):
      return _baseline_model_fn(features, labels, mode, head, make_optimizer,
                                weight_column)

    super().__init__(model_fn, model_dir=model_dir, config=config)


class BaselineClassifier(BaselineEstimator):
  """Predicts the class prior: `tf.estimator.BaselineClassifier` of TF 2.15.

  Args:
    model_dir, optimizer, config: As for `BaselineEstimator`.
    n_classes: The number of classes (>= 2).
    weight_column: A feature name or numeric column of example weights.
    label_vocabulary: The class names, when labels are strings.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None,
               loss_reduction='sum_over_batch_size'):
    head = head_lib.binary_or_multi_class_head(n_classes, weight_column,
                                               label_vocabulary, loss_reduction)
    self._build(head, model_dir, optimizer, config, weight_column)


class BaselineRegressor(BaselineEstimator):
  """Predicts the mean label: `tf.estimator.BaselineRegressor` of TF 2.15.

  Args:
    model_dir, optimizer, config: As for `BaselineEstimator`.
    label_dimension: Values per example.
    weight_column: A feature name or numeric column of example weights.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, model_dir=None, label_dimension=1, weight_column=None,
               optimizer='Ftrl', config=None, loss_reduction='sum_over_batch_size'):
    head = head_lib.RegressionHead(label_dimension=label_dimension,
                                   weight_column=weight_column,
                                   loss_reduction=loss_reduction)
    self._build(head, model_dir, optimizer, config, weight_column)
