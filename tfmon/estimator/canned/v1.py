"""tf.compat.v1.estimator's premade estimators (TF 1.x's `tf.estimator.DNNClassifier`
and kin, as TF 2.15 kept them).

They build the same networks as the v2 ones (dnn.py, linear.py; batch
normalization at `dnn/batchnorm_<i>`), but as TF 1.x trained and measured them:
`tf.compat.v1.train` optimizers (slots `<variable>/Adagrad`; defaults: DNN
Adagrad at 0.05, linear Ftrl at 0.2, or min(0.2, 1/sqrt(columns)) when
`optimizer=None`, wide-and-deep 0.001 and min(0.005, 1/sqrt(columns)), baseline
Ftrl at 0.3), losses summed over the batch (`loss_reduction='weighted_sum'`),
and `tf.compat.v1.metrics` (their AUC's summation). A TF 1.x model_dir of these
estimators continues here. The `*Estimator` variants take a head of head.py and
train it with the v1 optimizer.
"""

import math

import tensorflow as tf

from tfmon.estimator.canned import dnn as dnn_lib
from tfmon.estimator.canned import dnn_linear_combined
from tfmon.estimator.canned import head as head_lib
from tfmon.estimator.canned import linear as linear_lib
from tfmon.estimator.canned import model_fn_utils as utils
from tfmon.estimator.canned.head import MetricKeys, PredictionKeys
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import EstimatorSpec, ModeKeys

_OPTIMIZERS = {'Adagrad': tf.compat.v1.train.AdagradOptimizer,
               'Adam': tf.compat.v1.train.AdamOptimizer,
               'Ftrl': tf.compat.v1.train.FtrlOptimizer,
               'RMSProp': tf.compat.v1.train.RMSPropOptimizer,
               'SGD': tf.compat.v1.train.GradientDescentOptimizer}
# tf.compat.v1.losses.Reduction's values, to the reduction applied.
_REDUCTIONS = {'weighted_sum': 'sum', 'weighted_sum_over_batch_size': 'sum_over_batch_size',
               'weighted_mean': 'mean',
               'weighted_sum_by_nonzero_weights': 'sum_by_nonzero_weights'}


def _optimizer_factory(optimizer, learning_rate):
  """A function making a `tf.compat.v1.train.Optimizer` per model_fn call, as
  TF 1.x's estimators chose it; a bad name or object fails now."""
  if isinstance(optimizer, str):
    if optimizer not in _OPTIMIZERS:
      raise ValueError(f'Unsupported optimizer name: {optimizer!r}. Supported names '
                       f'are: {tuple(sorted(_OPTIMIZERS))}.')
    return lambda: _OPTIMIZERS[optimizer](learning_rate=learning_rate)
  if isinstance(optimizer, tf.compat.v1.train.Optimizer):
    return lambda: optimizer
  if callable(optimizer):
    def make():
      made = optimizer()
      if not isinstance(made, tf.compat.v1.train.Optimizer):
        raise ValueError(f'The optimizer callable returned {made!r}, not a '
                         'tf.compat.v1.train.Optimizer.')
      return made
    return make
  raise ValueError(f'The given object is not an Optimizer instance. Given: {optimizer!r}. '
                   'tf.compat.v1.estimator takes a tf.compat.v1.train optimizer (or '
                   'use the v2 estimators, which take tf.keras optimizers).')


def _partitioner(min_slice_size=256 << 10):
  """TF 1.x's partitioner in one process (no parameter servers): one part."""
  return tf.compat.v1.min_max_variable_partitioner(max_partitions=0,
                                                   min_slice_size=min_slice_size)


def _check_reduction(loss_reduction):
  if loss_reduction not in _REDUCTIONS:
    raise ValueError(f'Invalid loss_reduction: {loss_reduction!r}. Give one of '
                     f'{sorted(_REDUCTIONS)} (tf.compat.v1.losses.Reduction).')
  return loss_reduction


class _V1Head:
  """TF 1.x's way of a head (mixed into head.py's): the loss reduced by
  tf.compat.v1.losses' rule, a v1 optimizer's `minimize`, UPDATE_OPS run with
  the train op, and `tf.compat.v1.metrics`."""

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            train_op_fn=None, regularization_losses=None):
    with tf.compat.v1.name_scope(self._name, 'head'):
      predictions = self.predictions(logits)
      if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions,
                             export_outputs=self._export_outputs(predictions))
      logits = head_lib._check_logits(logits, self.logits_dimension)  # pylint: disable=protected-access
      processed = self._processed_labels(logits, labels)
      unreduced, weights = self._unweighted_loss_and_weights(logits, processed, features)
      reduction = _REDUCTIONS[self._loss_reduction]
      training_loss = head_lib.reduce_loss(unreduced, weights, reduction)
      regularization = (tf.math.add_n(regularization_losses) if regularization_losses
                        else None)
      loss = training_loss if regularization is None else training_loss + regularization
      if mode == ModeKeys.EVAL:
        metrics = self._v1_metrics(processed, predictions, unreduced, weights)
        if regularization is not None:
          metrics[self._summary_key(MetricKeys.LOSS_REGULARIZATION)] = (
              tf.compat.v1.metrics.mean(regularization))
        return EstimatorSpec(mode, predictions=predictions, loss=loss,
                             eval_metric_ops=metrics)
      if optimizer is not None and train_op_fn is not None:
        raise ValueError('train_op_fn and optimizer cannot both be set.')
      if optimizer is not None:
        train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
      elif train_op_fn is not None:
        train_op = train_op_fn(loss)
      else:
        raise ValueError('train_op_fn and optimizer cannot both be None.')
      update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
      if update_ops:
        train_op = tf.group(train_op, *update_ops)
    with tf.compat.v1.name_scope(None):
      tf.compat.v1.summary.scalar(self._summary_key(MetricKeys.LOSS), loss)
      if reduction == 'sum':
        tf.compat.v1.summary.scalar(self._summary_key(MetricKeys.LOSS_MEAN), (
            training_loss / tf.reduce_sum(weights * tf.ones_like(unreduced))))
      if regularization is not None:
        tf.compat.v1.summary.scalar(self._summary_key(MetricKeys.LOSS_REGULARIZATION),
                                    regularization)
    return EstimatorSpec(ModeKeys.TRAIN, predictions=predictions, loss=loss,
                         train_op=train_op)


def _mean(values, weights):
  """tf.compat.v1.metrics.mean of `values` with `weights` broadcast to them."""
  values = tf.cast(values, tf.float32)
  return tf.compat.v1.metrics.mean(values, weights=weights * tf.ones_like(values))


class _V1BinaryClassHead(_V1Head, head_lib.BinaryClassHead):

  def _v1_metrics(self, labels, predictions, unreduced, weights):
    k, m = self._summary_key, tf.compat.v1.metrics
    class_ids = predictions[PredictionKeys.CLASS_IDS]
    logistic = predictions[PredictionKeys.LOGISTIC]
    label_mean = _mean(labels, weights)
    weights_like_logistic = weights * tf.ones_like(logistic)
    metrics = {
        k(MetricKeys.LOSS_MEAN): m.mean(unreduced, weights=weights),
        k(MetricKeys.ACCURACY): m.accuracy(labels, class_ids, weights=weights),
        k(MetricKeys.PRECISION): m.precision(labels, class_ids, weights=weights),
        k(MetricKeys.RECALL): m.recall(labels, class_ids, weights=weights),
        k(MetricKeys.PREDICTION_MEAN): _mean(logistic, weights),
        k(MetricKeys.LABEL_MEAN): label_mean,
        k(MetricKeys.ACCURACY_BASELINE): tuple(
            tf.maximum(x, 1. - x) for x in label_mean),
        k(MetricKeys.AUC): m.auc(labels, logistic, weights=weights_like_logistic),
        k(MetricKeys.AUC_PR): m.auc(labels, logistic, weights=weights_like_logistic,
                                    curve='PR')}
    for threshold in self._thresholds:
      metrics[k(MetricKeys.ACCURACY_AT_THRESHOLD % threshold)] = m.accuracy(
          labels, tf.cast(logistic >= threshold, tf.float32), weights=weights)
      for key, metric in ((MetricKeys.PRECISION_AT_THRESHOLD, m.precision_at_thresholds),
                          (MetricKeys.RECALL_AT_THRESHOLD, m.recall_at_thresholds)):
        value, update = metric(labels, logistic, (threshold,), weights=weights)
        metrics[k(key % threshold)] = (tf.squeeze(value), tf.squeeze(update))
    return metrics


class _V1MultiClassHead(_V1Head, head_lib.MultiClassHead):

  def _v1_metrics(self, label_ids, predictions, unreduced, weights):
    k, m = self._summary_key, tf.compat.v1.metrics
    return {k(MetricKeys.LOSS_MEAN): m.mean(unreduced, weights=weights),
            k(MetricKeys.ACCURACY): m.accuracy(
                label_ids, predictions[PredictionKeys.CLASS_IDS], weights=weights)}


class _V1RegressionHead(_V1Head, head_lib.RegressionHead):

  def _v1_metrics(self, labels, predictions, unreduced, weights):
    k, m = self._summary_key, tf.compat.v1.metrics
    return {k(MetricKeys.LOSS_MEAN): m.mean(unreduced, weights=weights),
            k(MetricKeys.PREDICTION_MEAN): _mean(
                predictions[PredictionKeys.PREDICTIONS], weights),
            k(MetricKeys.LABEL_MEAN): m.mean(labels, weights=weights)}


def _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction):
  """TF 1.x's `_binary_logistic_or_multi_class_head`."""
  head_lib.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary,
                                      'sum')  # the checks
  _check_reduction(loss_reduction)
  if n_classes == 2:
    head = _V1BinaryClassHead(weight_column=weight_column,
                              label_vocabulary=label_vocabulary)
  else:
    head = _V1MultiClassHead(n_classes, weight_column=weight_column,
                             label_vocabulary=label_vocabulary)
  head._loss_reduction = loss_reduction  # pylint: disable=protected-access
  return head


def _regression_head(label_dimension, weight_column, loss_reduction):
  head = _V1RegressionHead(label_dimension=label_dimension, weight_column=weight_column)
  head._loss_reduction = _check_reduction(loss_reduction)  # pylint: disable=protected-access
  return head


def _spec(head, features, labels, mode, logits, make_optimizer=None, train_op_fn=None):
  """The spec of a v1 head (an optimizer's minimize), or of head.py's (its
  train_op_fn path runs the v1 optimizer)."""
  if isinstance(head, _V1Head):
    optimizer = make_optimizer() if make_optimizer and mode == ModeKeys.TRAIN else None
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer,
                                      train_op_fn=train_op_fn)
  if train_op_fn is None and mode == ModeKeys.TRAIN:
    def train_op_fn(loss):  # pylint: disable=function-redefined
      return make_optimizer().minimize(
          loss, global_step=tf.compat.v1.train.get_or_create_global_step())
  return head.create_estimator_spec(features, mode, logits, labels,
                                    train_op_fn=train_op_fn)


# ---- DNN ----


class DNNEstimator(Estimator):
  """tf.compat.v1.estimator.DNNEstimator: see dnn.DNNEstimator; `optimizer`
  is a `tf.compat.v1.train` optimizer (or its name: Adagrad at 0.05 by
  default), `input_layer_partitioner` is accepted and unused (one process)."""

  def __init__(self, head, hidden_units, feature_columns, model_dir=None,
               optimizer='Adagrad', activation_fn=tf.nn.relu, dropout=None,
               input_layer_partitioner=None, config=None, warm_start_from=None,
               batch_norm=False):
    del input_layer_partitioner  # variables are not partitioned in one process
    self._build(utils.check_estimator_head(head), hidden_units, feature_columns,
                model_dir, optimizer, activation_fn, dropout, config, warm_start_from,
                batch_norm)

  def _build(self, head, hidden_units, feature_columns, model_dir, optimizer,
             activation_fn, dropout, config, warm_start_from, batch_norm):
    hidden_units = utils.check_hidden_units(hidden_units)
    feature_columns = utils.check_feature_columns(feature_columns)
    make_optimizer = _optimizer_factory(optimizer, 0.05)
    utils.check_activation(activation_fn)
    utils.check_dropout(dropout)

    def model_fn(features, labels, mode):
      utils.check_features(features)
      # TF 1.x's scope, partitioner and all (one part: 'dnn/logits/kernel/part_0',
      # saved as 'dnn/logits/kernel'); its optimizer made its slots inside too,
      # which named them 'dnn/logits/kernel/t_0/Adagrad'.
      with tf.compat.v1.variable_scope('dnn', partitioner=_partitioner()):
        logits, _, update_ops = dnn_lib.dnn_logits(
            features, mode, head.logits_dimension, hidden_units, feature_columns,
            activation_fn, dropout, batch_norm, scope=None,
            input_layer_partitioner=_partitioner(64 << 20))
        for op in update_ops:  # TF 1.x's layers put them there
          tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, op)
        return _spec(head, features, labels, mode, logits, make_optimizer)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNClassifier(DNNEstimator):
  """tf.compat.v1.estimator.DNNClassifier (loss summed over the batch)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
               weight_column=None, label_vocabulary=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, input_layer_partitioner=None,
               config=None, warm_start_from=None, loss_reduction='weighted_sum',
               batch_norm=False):
    del input_layer_partitioner
    self._build(_classifier_head(n_classes, weight_column, label_vocabulary,
                                 loss_reduction), hidden_units, feature_columns,
                model_dir, optimizer, activation_fn, dropout, config, warm_start_from,
                batch_norm)


class DNNRegressor(DNNEstimator):
  """tf.compat.v1.estimator.DNNRegressor (loss summed over the batch)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Adagrad', activation_fn=tf.nn.relu,
               dropout=None, input_layer_partitioner=None, config=None,
               warm_start_from=None, loss_reduction='weighted_sum', batch_norm=False):
    del input_layer_partitioner
    self._build(_regression_head(label_dimension, weight_column, loss_reduction),
                hidden_units, feature_columns, model_dir, optimizer, activation_fn,
                dropout, config, warm_start_from, batch_norm)


# ---- linear ----


class LinearEstimator(Estimator):
  """tf.compat.v1.estimator.LinearEstimator: see linear.LinearEstimator;
  `optimizer` is a `tf.compat.v1.train` optimizer (or its name: Ftrl at 0.2; None:
  Ftrl at min(0.2, 1/sqrt(number of columns))); `partitioner` is unused."""

  def __init__(self, head, feature_columns, model_dir=None, optimizer='Ftrl',
               config=None, partitioner=None, sparse_combiner='sum', warm_start_from=None):
    del partitioner
    self._build(utils.check_estimator_head(head), feature_columns, model_dir, optimizer,
                config, warm_start_from, sparse_combiner)

  def _build(self, head, feature_columns, model_dir, optimizer, config, warm_start_from,
             sparse_combiner):
    feature_columns = utils.check_feature_columns(feature_columns)
    if optimizer is None:
      optimizer = tf.compat.v1.train.FtrlOptimizer(
          min(0.2, 1. / math.sqrt(len(feature_columns))))
    make_optimizer = _optimizer_factory(linear_lib.check_optimizer(optimizer), 0.2)
    linear_lib.check_sparse_combiner(sparse_combiner)

    def model_fn(features, labels, mode):
      utils.check_features(features)
      # As the DNN's: TF 1.x's partitioned scope, the slots made inside it
      # ('linear/linear_model/x/weights/part_0/Ftrl').
      with tf.compat.v1.variable_scope('linear', partitioner=_partitioner(64 << 20)):
        logits, _ = linear_lib.linear_logits(features, head.logits_dimension,
                                             feature_columns, sparse_combiner, scope=None)
        return _spec(head, features, labels, mode, logits, make_optimizer)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class LinearClassifier(LinearEstimator):
  """tf.compat.v1.estimator.LinearClassifier (loss summed over the batch)."""

  def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None, partitioner=None,
               warm_start_from=None, loss_reduction='weighted_sum', sparse_combiner='sum'):
    del partitioner
    self._build(_classifier_head(n_classes, weight_column, label_vocabulary,
                                 loss_reduction), feature_columns, model_dir, optimizer,
                config, warm_start_from, sparse_combiner)


class LinearRegressor(LinearEstimator):
  """tf.compat.v1.estimator.LinearRegressor (loss summed over the batch)."""

  def __init__(self, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Ftrl', config=None, partitioner=None,
               warm_start_from=None, loss_reduction='weighted_sum', sparse_combiner='sum'):
    del partitioner
    self._build(_regression_head(label_dimension, weight_column, loss_reduction),
                feature_columns, model_dir, optimizer, config, warm_start_from,
                sparse_combiner)


# ---- wide and deep ----


class DNNLinearCombinedEstimator(Estimator):
  """tf.compat.v1.estimator.DNNLinearCombinedEstimator: see
  dnn_linear_combined.DNNLinearCombinedEstimator; both optimizers are
  `tf.compat.v1.train` ones, and the global step counts once per step."""

  def __init__(self, head, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               input_layer_partitioner=None, config=None, batch_norm=False,
               linear_sparse_combiner='sum'):
    del input_layer_partitioner
    self._build(utils.check_estimator_head(head), model_dir, linear_feature_columns,
                linear_optimizer, dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                dnn_activation_fn, dnn_dropout, config, None, batch_norm,
                linear_sparse_combiner)

  def _build(self, head, model_dir, linear_feature_columns, linear_optimizer,
             dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
             dnn_dropout, config, warm_start_from, batch_norm, linear_sparse_combiner):
    (linear_feature_columns, make_linear, dnn_feature_columns, make_dnn,
     dnn_hidden_units) = dnn_linear_combined.check_arguments(
         _optimizer_factory, linear_feature_columns, linear_optimizer,
         dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
         dnn_dropout, linear_sparse_combiner)

    def model_fn(features, labels, mode):
      utils.check_features(features)
      logits, parts = [], []
      if dnn_feature_columns:
        dnn_logits, variables, update_ops = dnn_lib.dnn_logits(
            features, mode, head.logits_dimension, dnn_hidden_units, dnn_feature_columns,
            dnn_activation_fn, dnn_dropout, batch_norm)
        for op in update_ops:
          tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, op)
        logits.append(dnn_logits)
        parts.append((make_dnn, variables))
      if linear_feature_columns:
        linear_logits, variables = linear_lib.linear_logits(
            features, head.logits_dimension, linear_feature_columns,
            linear_sparse_combiner)
        with tf.compat.v1.name_scope('linear'):
          dnn_lib._layer_summary(linear_logits, 'linear')  # pylint: disable=protected-access
        logits.append(linear_logits)
        parts.append((make_linear, variables))

      def train_op_fn(loss):  # each minimizes its part; one global step
        train_op = tf.group(*[make().minimize(loss, var_list=variables)
                              for make, variables in parts])
        with tf.control_dependencies([train_op]):
          return tf.compat.v1.assign_add(tf.compat.v1.train.get_global_step(), 1).op

      return _spec(head, features, labels, mode, tf.math.add_n(logits),
                   train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNLinearCombinedClassifier(DNNLinearCombinedEstimator):
  """tf.compat.v1.estimator.DNNLinearCombinedClassifier (loss summed over the batch)."""

  def __init__(self, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               n_classes=2, weight_column=None, label_vocabulary=None,
               input_layer_partitioner=None, config=None, warm_start_from=None,
               loss_reduction='weighted_sum', batch_norm=False,
               linear_sparse_combiner='sum'):
    del input_layer_partitioner
    self._build(_classifier_head(n_classes, weight_column, label_vocabulary,
                                 loss_reduction), model_dir, linear_feature_columns,
                linear_optimizer, dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                dnn_activation_fn, dnn_dropout, config, warm_start_from, batch_norm,
                linear_sparse_combiner)


class DNNLinearCombinedRegressor(DNNLinearCombinedEstimator):
  """tf.compat.v1.estimator.DNNLinearCombinedRegressor (loss summed over the batch)."""

  def __init__(self, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               label_dimension=1, weight_column=None, input_layer_partitioner=None,
               config=None, warm_start_from=None, loss_reduction='weighted_sum',
               batch_norm=False, linear_sparse_combiner='sum'):
    del input_layer_partitioner
    self._build(_regression_head(label_dimension, weight_column, loss_reduction),
                model_dir, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, config,
                warm_start_from, batch_norm, linear_sparse_combiner)


# ---- baseline ----


class BaselineEstimator(Estimator):
  """tf.compat.v1.estimator.BaselineEstimator: see baseline.BaselineEstimator;
  `optimizer` is a `tf.compat.v1.train` optimizer (or its name: Ftrl at 0.3)."""

  def __init__(self, head, model_dir=None, optimizer='Ftrl', config=None):
    self._build(utils.check_estimator_head(head), model_dir, optimizer, config, None)

  def _build(self, head, model_dir, optimizer, config, weight_column):
    from tfmon.estimator.canned import baseline as baseline_lib  # pylint: disable=g-import-not-at-top
    make_optimizer = _optimizer_factory(optimizer, 0.3)

    def model_fn(features, labels, mode):
      utils.check_features(features)
      logits = baseline_lib.baseline_logits(features, head.logits_dimension,
                                            weight_column)
      return _spec(head, features, labels, mode, logits, make_optimizer)

    super().__init__(model_fn, model_dir=model_dir, config=config)


class BaselineClassifier(BaselineEstimator):
  """tf.compat.v1.estimator.BaselineClassifier (loss summed over the batch)."""

  def __init__(self, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None,
               loss_reduction='weighted_sum'):
    self._build(_classifier_head(n_classes, weight_column, label_vocabulary,
                                 loss_reduction), model_dir, optimizer, config,
                weight_column)


class BaselineRegressor(BaselineEstimator):
  """tf.compat.v1.estimator.BaselineRegressor (loss summed over the batch)."""

  def __init__(self, model_dir=None, label_dimension=1, weight_column=None,
               optimizer='Ftrl', config=None, loss_reduction='weighted_sum'):
    self._build(_regression_head(label_dimension, weight_column, loss_reduction),
                model_dir, optimizer, config, weight_column)
