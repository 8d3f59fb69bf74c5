"""DNNLinearCombinedClassifier/Regressor/Estimator: TF 2.15's wide-and-deep
premade estimators.

The logits are the sum of dnn.py's network (`dnn/...`) and linear.py's model
(`linear/linear_model/...`), each trained by its own optimizer: the DNN's
(default Adagrad at 0.001) counts the global step, the linear one's (default
Ftrl at min(0.005, 1/sqrt(number of linear columns))) its own
`training/Ftrl/iter`, as TF 2.15 ran them.
"""

import math

import tensorflow as tf

from tfmon.estimator.canned import dnn as dnn_lib
from tfmon.estimator.canned import head as head_lib
from tfmon.estimator.canned import linear as linear_lib
from tfmon.estimator.canned import model_fn_utils as utils
from tfmon.estimator.canned import optimizers
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import ModeKeys

_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005


def check_arguments(optimizer_factory, linear_feature_columns, linear_optimizer,
                    dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                    dnn_activation_fn, dnn_dropout, linear_sparse_combiner):
  """The arguments checked as TF 2.15 checked them: `(linear feature columns,
  linear optimizer factory or None, dnn feature columns, its factory or None,
  hidden units)`, each factory `optimizer_factory(optimizer, default rate)`
  (the v2 estimators' or the v1 ones').

  Raises:
    ValueError: naming the bad argument and the fix.
  """
  if not linear_feature_columns and not dnn_feature_columns:
    raise ValueError('Either linear_feature_columns or dnn_feature_columns must be '
                     'defined.')
  make_linear = make_dnn = None
  if linear_feature_columns:
    linear_feature_columns = utils.check_feature_columns(
        linear_feature_columns, 'linear_feature_columns')
    rate = min(_LINEAR_LEARNING_RATE, 1. / math.sqrt(len(linear_feature_columns)))
    make_linear = optimizer_factory(linear_lib.check_optimizer(linear_optimizer), rate)
  if dnn_feature_columns:
    dnn_feature_columns = utils.check_feature_columns(
        dnn_feature_columns, 'dnn_feature_columns')
    if not dnn_hidden_units:
      raise ValueError('dnn_hidden_units must be defined when dnn_feature_columns is '
                       'specified: give the hidden layer sizes, such as [64, 32].')
    dnn_hidden_units = utils.check_hidden_units(dnn_hidden_units, 'dnn_hidden_units')
    make_dnn = optimizer_factory(dnn_optimizer, _DNN_LEARNING_RATE)
  utils.check_activation(dnn_activation_fn)
  utils.check_dropout(dnn_dropout)
  linear_lib.check_sparse_combiner(linear_sparse_combiner)
  return linear_feature_columns, make_linear, dnn_feature_columns, make_dnn, dnn_hidden_units


def _combined_model_fn(features, labels, mode, head, linear_feature_columns,
                       make_linear_optimizer, dnn_feature_columns, make_dnn_optimizer,
                       dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm,
                       linear_sparse_combiner):
  utils.check_features(features)
  logits, parts = [], []
  if dnn_feature_columns:
    dnn_logits, variables, update_ops = dnn_lib.dnn_logits(
        features, mode, head.logits_dimension, dnn_hidden_units, dnn_feature_columns,
        dnn_activation_fn, dnn_dropout, batch_norm)
    logits.append(dnn_logits)
    parts.append((make_dnn_optimizer, variables, update_ops))
  if linear_feature_columns:
    linear_logits, variables = linear_lib.linear_logits(
        features, head.logits_dimension, linear_feature_columns, linear_sparse_combiner)
    with tf.compat.v1.name_scope('linear'):
      dnn_lib._layer_summary(linear_logits, 'linear')  # pylint: disable=protected-access
    logits.append(linear_logits)
    parts.append((make_linear_optimizer, variables, []))

  def train_op_fn(loss):
    # The first model's optimizer counts the global step, the other its own.
    train_ops = []
    for i, (make_optimizer, variables, update_ops) in enumerate(parts):
      step = tf.compat.v1.train.get_or_create_global_step() if i == 0 else None
      train_ops.append(optimizers.minimize(make_optimizer(), loss, variables, step))
      train_ops += update_ops
    return tf.group(*train_ops)

  return head.create_estimator_spec(
      features=features, mode=mode, labels=labels, logits=tf.math.add_n(logits),
      train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)


class DNNLinearCombinedEstimator(Estimator):
  """A linear model and a DNN summed, with any head:
  `tf.estimator.DNNLinearCombinedEstimator` of TF 2.15.

  Args:
    head: A head (`tfmon.estimator.canned.BinaryClassHead`, ...).
    model_dir: Where checkpoints go (a TF 2.15 model_dir continues here).
    linear_feature_columns: Columns of the linear part.
    linear_optimizer: The linear part's optimizer (default 'Ftrl'; see
      optimizers.get_optimizer).
    dnn_feature_columns: Columns of the DNN part.
    dnn_optimizer: The DNN's optimizer (default 'Adagrad').
    dnn_hidden_units: Sizes of the DNN's hidden layers (needed with DNN columns).
    dnn_activation_fn: The hidden layers' activation.
    dnn_dropout: Dropout rate of the DNN's hidden units in training, or None.
    config: A `tfmon.estimator.RunConfig`.
    batch_norm: Batch-normalize each hidden layer.
    linear_sparse_combiner: 'sum' (default), 'mean' or 'sqrtn'.

  Raises:
    ValueError: neither linear nor DNN columns, DNN columns without hidden
      units, or a bad head, column, optimizer or setting, named with the fix.
  """

  def __init__(self, head, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               config=None, batch_norm=False, linear_sparse_combiner='sum'):
    self._build(utils.check_estimator_head(head), model_dir, linear_feature_columns,
                linear_optimizer, dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                dnn_activation_fn, dnn_dropout, config, None, batch_norm,
                linear_sparse_combiner)

  def _build(self, head, model_dir, linear_feature_columns, linear_optimizer,
             dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
             dnn_dropout, config, warm_start_from, batch_norm, linear_sparse_combiner):
    (linear_feature_columns, make_linear_optimizer, dnn_feature_columns,
     make_dnn_optimizer, dnn_hidden_units) = check_arguments(
         utils.optimizer_factory, linear_feature_columns, linear_optimizer,
         dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
         dnn_dropout, linear_sparse_combiner)

    def model_fn(features, labels, mode):
      return _combined_model_fn(
          features, labels, mode, head, linear_feature_columns, make_linear_optimizer,
          dnn_feature_columns, make_dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
          dnn_dropout, batch_norm, linear_sparse_combiner)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNLinearCombinedClassifier(DNNLinearCombinedEstimator):
  """A wide-and-deep classifier: `tf.estimator.DNNLinearCombinedClassifier` of
  TF 2.15.

  Args:
    As `DNNLinearCombinedEstimator`'s (but `head`), plus:
    n_classes: The number of classes (>= 2; 2 is binary classification).
    weight_column: A feature name or numeric column of example weights.
    label_vocabulary: The class names, when labels are strings.
    warm_start_from: As for `Estimator`.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               n_classes=2, weight_column=None, label_vocabulary=None, config=None,
               warm_start_from=None, loss_reduction='sum_over_batch_size',
               batch_norm=False, linear_sparse_combiner='sum'):
    head = head_lib.binary_or_multi_class_head(n_classes, weight_column,
                                               label_vocabulary, loss_reduction)
    self._build(head, model_dir, linear_feature_columns, linear_optimizer,
                dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
                dnn_dropout, config, warm_start_from, batch_norm, linear_sparse_combiner)


class DNNLinearCombinedRegressor(DNNLinearCombinedEstimator):
  """A wide-and-deep regressor: `tf.estimator.DNNLinearCombinedRegressor` of
  TF 2.15.

  Args:
    As `DNNLinearCombinedEstimator`'s (but `head`), plus:
    label_dimension: Values per example.
    weight_column: A feature name or numeric column of example weights.
    warm_start_from: As for `Estimator`.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               label_dimension=1, weight_column=None, config=None, warm_start_from=None,
               loss_reduction='sum_over_batch_size', batch_norm=False,
               linear_sparse_combiner='sum'):
    head = head_lib.RegressionHead(label_dimension=label_dimension,
                                   weight_column=weight_column,
                                   loss_reduction=loss_reduction)
    self._build(head, model_dir, linear_feature_columns, linear_optimizer,
                dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
                dnn_dropout, config, warm_start_from, batch_norm, linear_sparse_combiner)
