"""TF 2.15's heads (`tf.estimator.BinaryClassHead`, ...): from logits to loss,
predictions, evaluation metrics, export outputs and the EstimatorSpec.

A head is what a premade estimator's model_fn ends with: given the logits it
builds, in the model_fn's graph, the predictions (`logits`, `logistic`,
`probabilities`, `class_ids`, `classes`, `all_class_ids`, `all_classes`, or
`predictions`), the loss (reduced as `loss_reduction` says), the metrics of
`evaluate()` under TF 2.15's keys, and the serving signatures
(`serving_default`, `classification`, `regression`, `predict`). The metrics
are metrics.py's; MultiHead is in multi_head.py.
"""

import inspect

import numpy as np
import tensorflow as tf

from tfmon.estimator import export as export_lib
from tfmon.estimator.canned import metrics as metrics_lib
from tfmon.estimator.canned import optimizers
from tfmon.estimator.spec import EstimatorSpec, ModeKeys

DEFAULT_SERVING_KEY = 'serving_default'
CLASSIFY_SERVING_KEY = 'classification'
REGRESS_SERVING_KEY = 'regression'
PREDICT_SERVING_KEY = 'predict'


class MetricKeys:
  """The keys of `evaluate()`'s results, TF 2.15's."""
  LOSS = 'loss'
  LOSS_MEAN = 'average_loss'
  LOSS_REGULARIZATION = 'regularization_loss'
  ACCURACY = 'accuracy'
  PRECISION = 'precision'
  RECALL = 'recall'
  ACCURACY_BASELINE = 'accuracy_baseline'
  AUC = 'auc'
  AUC_PR = 'auc_precision_recall'
  LABEL_MEAN = 'label/mean'
  PREDICTION_MEAN = 'prediction/mean'
  ACCURACY_AT_THRESHOLD = 'accuracy/positive_threshold_%g'
  PRECISION_AT_THRESHOLD = 'precision/positive_threshold_%g'
  RECALL_AT_THRESHOLD = 'recall/positive_threshold_%g'
  PROBABILITY_MEAN_AT_CLASS = 'probability_mean/class%d'
  AUC_AT_CLASS = 'auc/class%d'
  AUC_PR_AT_CLASS = 'auc_precision_recall/class%d'
  PROBABILITY_MEAN_AT_NAME = 'probability_mean/%s'
  AUC_AT_NAME = 'auc/%s'
  AUC_PR_AT_NAME = 'auc_precision_recall/%s'


class PredictionKeys:
  """The keys of `predict()`'s results, TF 2.15's."""
  CLASSES = 'classes'
  CLASS_IDS = 'class_ids'
  ALL_CLASSES = 'all_classes'
  ALL_CLASS_IDS = 'all_class_ids'
  LOGISTIC = 'logistic'
  LOGITS = 'logits'
  PREDICTIONS = 'predictions'
  PROBABILITIES = 'probabilities'


# tf.keras.losses.Reduction's values, and tf.compat.v1.losses.Reduction's that
# mean the same, to the reduction applied.
REDUCTIONS = {'sum_over_batch_size': 'sum_over_batch_size', 'auto': 'sum_over_batch_size',
               'sum': 'sum', 'weighted_sum_over_batch_size': 'sum_over_batch_size',
               'weighted_sum': 'sum'}


def _check_loss_reduction(loss_reduction):
  if loss_reduction not in REDUCTIONS:
    raise ValueError(f'Invalid loss_reduction: {loss_reduction!r}. Give one of '
                     "'sum_over_batch_size' (the default), 'sum' or 'auto'.")
  return REDUCTIONS[loss_reduction]


def _check_loss_fn(loss_fn):
  if loss_fn is None:
    return None
  if not callable(loss_fn):
    raise ValueError(f'loss_fn={loss_fn!r} is not callable.')
  args = set(inspect.signature(loss_fn).parameters)
  missing = sorted({'labels', 'logits'} - args)
  unexpected = sorted(args - {'labels', 'logits', 'features', 'loss_reduction'})
  if missing or unexpected:
    raise ValueError(f'loss_fn must take labels and logits (and may take features); '
                     f'it lacks {missing} and has unexpected {unexpected}.')
  return loss_fn


def _check_vocabulary(label_vocabulary, n_classes):
  if label_vocabulary is None:
    return None
  if not isinstance(label_vocabulary, (list, tuple)):
    raise ValueError(f'label_vocabulary should be a list or a tuple of strings. Given '
                     f'type: {type(label_vocabulary).__name__}.')
  if not all(isinstance(v, str) for v in label_vocabulary):
    raise ValueError(f'label_vocabulary={label_vocabulary!r} must hold strings.')
  if len(label_vocabulary) != n_classes:
    raise ValueError(f'label_vocabulary has {len(label_vocabulary)} items, but there '
                     f'are n_classes={n_classes} classes: give one string per class.')
  return tuple(label_vocabulary)


def _check_thresholds(thresholds):
  thresholds = tuple(thresholds or ())
  for threshold in thresholds:
    if not 0.0 < threshold < 1.0:
      raise ValueError(f'thresholds must be in (0, 1); given {thresholds}.')
  return thresholds


# ---- shared checks and pieces ----


def _check_logits(logits, dimension):
  with tf.compat.v1.name_scope('logits'):
    logits = tf.cast(logits, tf.float32)
    shape = logits.shape
    if shape.ndims is not None and shape.ndims < 2:
      raise ValueError(f'logits must have rank at least 2; got shape {shape}.')
    if shape.ndims is not None and shape[-1] is not None and shape[-1] != dimension:
      raise ValueError(f'logits shape must be [D0, D1, ... DN, {dimension}], got {shape}.')
    return logits


def _check_labels(labels, logits, dimension):
  """Dense labels shaped as logits with last dimension `dimension`."""
  if labels is None:
    raise ValueError('You must provide a labels Tensor. Given: None. Check that your '
                     'data contains your label feature, and that input_fn returns '
                     '(features, labels).')
  with tf.compat.v1.name_scope('labels'):
    labels = tf.compat.v1.convert_to_tensor_or_sparse_tensor(labels)
    if isinstance(labels, tf.SparseTensor):
      raise ValueError(f'SparseTensor labels are not supported: labels must be a '
                       f'Tensor of shape [batch_size, {dimension}]; use '
                       'tf.sparse.to_dense in input_fn.')
    if (labels.shape.ndims is not None and logits.shape.ndims is not None
        and labels.shape.ndims == logits.shape.ndims - 1):
      labels = tf.expand_dims(labels, -1)
    if labels.shape.ndims is not None:
      if labels.shape.ndims < 2:
        raise ValueError(f'labels must have shape [batch_size, {dimension}]; got '
                         f'{labels.shape}.')
      if labels.shape[-1] is not None and labels.shape[-1] != dimension:
        raise ValueError(f'Mismatched label shape. Expected labels dimension={dimension}.'
                         f'  Received {labels.shape[-1]}. Check the estimator\'s '
                         'n_classes or label_dimension, and the labels input_fn returns.')
    expected = tf.concat([tf.shape(logits)[:-1], [dimension]], axis=0)
    check = tf.compat.v1.debugging.assert_equal(
        expected, tf.shape(labels), message=f'labels shape must be [D0, D1, ... DN, '
        f'{dimension}]', data=['expected_labels_shape: ', expected,
                               'labels_shape: ', tf.shape(labels)])
    with tf.control_dependencies([check]):
      return tf.identity(labels)


def _check_label_range(labels, n_classes, message=None):
  with tf.compat.v1.name_scope('check_label_range'):
    less = tf.compat.v1.debugging.assert_less_equal(
        labels, tf.cast(n_classes - 1, labels.dtype),
        message=message or f'Labels must be <= n_classes - 1 = {n_classes - 1}')
    positive = tf.compat.v1.debugging.assert_non_negative(
        labels, message=message or 'Labels must be >= 0')
    with tf.control_dependencies([less, positive]):
      return tf.identity(labels)


def _weights(features, weight_column, logits, allow_per_logit=False):
  """The example weights of `weight_column` (a key or a numeric column), shaped
  [batch, 1] (or as logits, if allowed); 1.0 without one."""
  if weight_column is None:
    return 1.0
  with tf.compat.v1.name_scope('weights'):
    if isinstance(weight_column, str):
      key, size, normalizer = weight_column, 1, None
    elif type(weight_column).__name__ == 'NumericColumn':
      key, normalizer = weight_column.key, weight_column.normalizer_fn
      size = int(np.prod(weight_column.shape))
    else:
      raise TypeError(f'weight_column must be a feature name or a '
                      f'tf.feature_column.numeric_column; given '
                      f'{type(weight_column).__name__}.')
    if key not in features:
      raise ValueError(f'weight_column {key!r} is not among the features '
                       f'{sorted(features)}: input_fn must return it.')
    weights = features[key]
    if not (weights.dtype.is_floating or weights.dtype.is_integer):
      raise ValueError(f'weight_column {key!r} should be castable to float. Given '
                       f'dtype: {weights.dtype.name}.')
    if normalizer is not None:
      weights = normalizer(weights)
    weights = tf.reshape(tf.cast(weights, tf.float32), [-1, size])
    batch = tf.shape(logits)[:-1]
    allowed = [tf.reduce_all(tf.equal(tf.concat([batch, [1]], 0), tf.shape(weights)))]
    if allow_per_logit:
      allowed.append(tf.reduce_all(tf.equal(tf.shape(logits), tf.shape(weights))))
    check = tf.debugging.Assert(
        tf.reduce_any(allowed),
        ['weights shape must be [batch_size, 1]' + (
            ' or as logits' if allow_per_logit else ''),
         'logits_shape: ', tf.shape(logits), 'weights_shape: ', tf.shape(weights)])
    with tf.control_dependencies([check]):
      return tf.identity(weights)


def reduce_loss(unweighted_loss, weights, reduction):
  """The weighted loss reduced as Keras 2's compute_weighted_loss (and
  tf.compat.v1.losses' for 'mean' and 'sum_by_nonzero_weights') did."""
  weights = tf.cast(weights, tf.float32) * tf.ones_like(unweighted_loss)
  total = tf.reduce_sum(unweighted_loss * weights)
  if reduction == 'sum':
    return total
  count = {'sum_over_batch_size': tf.size(weights), 'mean': tf.reduce_sum(weights),
           'sum_by_nonzero_weights': tf.math.count_nonzero(weights)}[reduction]
  return tf.math.divide_no_nan(total, tf.cast(count, tf.float32))


def _call_loss_fn(loss_fn, labels, logits, features, expected_dimension):
  kwargs = {'features': features} if 'features' in _arguments(loss_fn) else {}
  with tf.compat.v1.name_scope('call_loss_fn'):
    loss = loss_fn(labels=labels, logits=logits, **kwargs)
    expected = tf.concat([tf.shape(logits)[:-1], [expected_dimension]], axis=0)
    check = tf.debugging.Assert(
        tf.reduce_all(tf.equal(tf.shape(loss), expected)),
        [f'loss_fn must return Tensor of shape [D0, D1, ... DN, {expected_dimension}]. ',
         'logits_shape: ', tf.shape(logits), 'loss_shape: ', tf.shape(loss)])
    with tf.control_dependencies([check]):
      return tf.identity(loss)


def _arguments(fn):
  return set(inspect.signature(fn).parameters)


def _all_class_ids(logits, n_classes):
  return tf.tile(tf.range(n_classes)[None, :], [tf.shape(logits)[0], 1])


def _all_classes(logits, n_classes, label_vocabulary=None):
  if label_vocabulary:
    classes = tf.constant([list(label_vocabulary)])
  else:
    classes = tf.strings.as_string(tf.range(n_classes)[None, :])
  return tf.tile(classes, [tf.shape(logits)[0], 1])


def _class_id_lookup(labels, label_vocabulary):
  table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
      list(label_vocabulary), tf.range(len(label_vocabulary), dtype=tf.int64)), -1,
                                    name='class_id_lookup')
  return table.lookup(labels)


def _class_string_lookup(class_ids, label_vocabulary):
  table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
      tf.range(len(label_vocabulary), dtype=tf.int64), list(label_vocabulary)), 'UNK',
                                    name='class_string_lookup')
  return table.lookup(class_ids)


def train_op(optimizer, trainable_variables, train_op_fn, update_ops, loss):
  """TF 2.15's train op: the optimizer's (counting the global step) or
  `train_op_fn`'s, then the update ops, under the root `training` scope."""
  if update_ops is not None and not isinstance(update_ops, (list, tuple)):
    raise ValueError(f'update_ops should be a list or a tuple. Given type: '
                     f'{type(update_ops).__name__}.')
  if optimizer is not None and train_op_fn is not None:
    raise ValueError('train_op_fn and optimizer cannot both be set.')
  if optimizer is None and train_op_fn is None:
    raise ValueError('train_op_fn and optimizer cannot both be None.')
  with tf.compat.v1.name_scope(None), tf.compat.v1.name_scope('training'):
    if optimizer is not None:
      if not isinstance(trainable_variables, (list, tuple)):
        raise ValueError(f'trainable_variables should be a list or a tuple of the '
                         f'variables to train; given {trainable_variables!r}.')
      op = optimizers.minimize(
          optimizers.get_optimizer(optimizer), loss, list(trainable_variables),
          global_step=tf.compat.v1.train.get_or_create_global_step())
    else:
      op = train_op_fn(loss)
    if update_ops:
      op = tf.group(op, *update_ops)
    return op


def summaries(loss, regularization_losses, summary_key):
  with tf.compat.v1.name_scope(None):
    tf.compat.v1.summary.scalar(summary_key(MetricKeys.LOSS), loss)
    if regularization_losses is not None:
      tf.compat.v1.summary.scalar(summary_key(MetricKeys.LOSS_REGULARIZATION),
                                  tf.math.add_n(regularization_losses))


# ---- heads ----


class Head:
  """What a head does, given logits (TF 2.15's `tf.estimator.Head` interface).

  Subclasses give `logits_dimension`, `loss`, `predictions`, `metrics`,
  `update_metrics` and `_export_outputs`; `create_estimator_spec` puts them
  together for a mode, as TF's heads did.
  """

  _name = None
  _loss_reduction = 'sum_over_batch_size'

  @property
  def name(self):
    return self._name

  @property
  def logits_dimension(self):
    """The size of the last dimension of the logits this head takes."""
    raise NotImplementedError(f'{type(self).__name__} must define logits_dimension.')

  def predictions(self, logits, keys=None):
    """A dict of prediction tensors from `logits` (those in `keys`, if given)."""
    raise NotImplementedError(f'{type(self).__name__} must define predictions.')

  def metrics(self, regularization_losses=None):
    """A dict of the Keras metric objects this head evaluates."""
    raise NotImplementedError(f'{type(self).__name__} must define metrics.')

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Updates `eval_metrics` (from `metrics()`) with a batch; returns them."""
    raise NotImplementedError(f'{type(self).__name__} must define update_metrics.')

  @property
  def loss_reduction(self):
    return self._loss_reduction

  def _summary_key(self, key):
    return f'{key}/{self._name}' if self._name else key

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    """The training loss: the reduced, weighted loss plus regularization."""
    del mode
    with tf.compat.v1.name_scope('losses'):
      logits = _check_logits(logits, self.logits_dimension)
      labels = self._processed_labels(logits, labels)
      unweighted, weights = self._unweighted_loss_and_weights(logits, labels, features)
      loss = reduce_loss(unweighted, weights, REDUCTIONS[self._loss_reduction])
      if regularization_losses is not None:
        loss += tf.math.add_n(regularization_losses)
      return loss

  def _update_regularization(self, eval_metrics, regularization_losses):
    if regularization_losses is not None:
      eval_metrics[self._summary_key(MetricKeys.LOSS_REGULARIZATION)].update_state(
          tf.math.add_n(regularization_losses))

  def _regularization_metric(self, metrics, regularization_losses):
    if regularization_losses is not None:
      key = self._summary_key(MetricKeys.LOSS_REGULARIZATION)
      metrics[key] = metrics_lib.Mean(key)
    return metrics

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    """The EstimatorSpec of `mode` for these logits.

    Args:
      features: The features dict (weights are read from it).
      mode: A `ModeKeys` value.
      logits: The model's logits, `[batch_size, logits_dimension]`.
      labels: The labels (TRAIN and EVAL).
      optimizer: An optimizer (see optimizers.get_optimizer) training
        `trainable_variables` and counting the global step; or
      train_op_fn: A function from the loss to the train op.
      trainable_variables: The variables `optimizer` trains.
      update_ops: Ops run with the train op (batch normalization's).
      regularization_losses: Scalar tensors added to the loss.

    Returns:
      A `tfmon.estimator.EstimatorSpec`.
    """
    with tf.compat.v1.name_scope(self._name, 'head'):
      predictions = self.predictions(logits)
      spec = self._spec_or_loss(mode, features, logits, labels, predictions,
                                lambda: self._export_outputs(predictions),
                                regularization_losses)
      if isinstance(spec, EstimatorSpec):
        return spec
      op = train_op(optimizer, trainable_variables, train_op_fn, update_ops, spec)
    summaries(spec, regularization_losses, self._summary_key)
    return EstimatorSpec(ModeKeys.TRAIN, predictions=predictions, loss=spec,
                         train_op=op)

  def _spec_or_loss(self, mode, features, logits, labels, predictions, export_outputs,
                    regularization_losses):
    """The PREDICT or EVAL spec (`export_outputs()` giving PREDICT's), or in
    TRAIN the loss, whose train op and summaries the caller makes (the latter
    outside the head's name scope, as TF 2.15 named them)."""
    if mode == ModeKeys.PREDICT:
      return EstimatorSpec(mode, predictions=predictions, export_outputs=export_outputs())
    loss = self.loss(labels, logits, features, mode, regularization_losses)
    if mode != ModeKeys.EVAL:
      return loss
    metrics = self.update_metrics(self.metrics(regularization_losses), features, logits,
                                  labels, mode, regularization_losses)
    return EstimatorSpec(mode, predictions=predictions, loss=loss,
                         eval_metric_ops=metrics_lib.eval_metric_ops(metrics))


class _ClassHead(Head):
  """What the binary and multi-class heads share."""

  def _label_ids(self, logits, labels):
    labels = _check_labels(labels, logits, 1)
    if self._label_vocabulary is not None:
      if labels.dtype != tf.string:
        raise ValueError(f'Labels dtype should be string if there is a vocabulary. '
                         f'Instead got {labels.dtype.name}.')
      return _class_id_lookup(labels, self._label_vocabulary)
    if not labels.dtype.is_integer and self._n_classes > 2:
      raise ValueError(f'Labels dtype should be integer. Instead got '
                       f'{labels.dtype.name}: give class ids, or a label_vocabulary '
                       'for string labels.')
    if labels.dtype == tf.string:
      raise ValueError('Labels are strings: give the head a label_vocabulary.')
    return labels

  def _class_outputs(self, predictions, class_logits, keys):
    if PredictionKeys.CLASS_IDS in keys or PredictionKeys.CLASSES in keys:
      class_ids = tf.expand_dims(tf.compat.v1.argmax(
          class_logits, axis=-1, name=PredictionKeys.CLASS_IDS), -1)
      if PredictionKeys.CLASS_IDS in keys:
        predictions[PredictionKeys.CLASS_IDS] = class_ids
      if PredictionKeys.CLASSES in keys:
        predictions[PredictionKeys.CLASSES] = (
            _class_string_lookup(class_ids, self._label_vocabulary)
            if self._label_vocabulary else
            tf.strings.as_string(class_ids, name='str_classes'))
    if PredictionKeys.ALL_CLASS_IDS in keys:
      predictions[PredictionKeys.ALL_CLASS_IDS] = _all_class_ids(class_logits,
                                                                 self._n_classes)
    if PredictionKeys.ALL_CLASSES in keys:
      predictions[PredictionKeys.ALL_CLASSES] = _all_classes(
          class_logits, self._n_classes, self._label_vocabulary)
    return predictions


def _threshold_metrics(thresholds, summary_key):
  """Accuracy, precision and recall at each extra threshold, by key."""
  metrics = {}
  for threshold in thresholds:
    for key, metric in ((MetricKeys.ACCURACY_AT_THRESHOLD, metrics_lib.Accuracy),
                        (MetricKeys.PRECISION_AT_THRESHOLD, metrics_lib.Precision),
                        (MetricKeys.RECALL_AT_THRESHOLD, metrics_lib.Recall)):
      metrics[summary_key(key % threshold)] = metric(summary_key(key % threshold),
                                                     threshold)
  return metrics


def _prediction_keys(keys, valid):
  for key in keys or ():
    if key not in valid:
      raise ValueError(f'Prediction key must be in PredictionKeys, given: {key!r}. '
                       f'Valid prediction keys include {valid}.')
  return keys or valid


class BinaryClassHead(_ClassHead):
  """Two classes, one logit, sigmoid cross entropy: `tf.estimator.BinaryClassHead`.

  Args:
    weight_column: A feature name or `tf.feature_column.numeric_column` of
      example weights.
    thresholds: Extra thresholds in (0, 1) for accuracy/precision/recall.
    label_vocabulary: Two strings naming the classes, when labels are strings.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
    loss_fn: `loss_fn(labels, logits[, features])`, the unreduced loss.
    name: Suffix of the metric and summary keys ('accuracy/<name>').

  Raises:
    ValueError: a bad vocabulary, threshold, reduction or loss_fn, named.
  """

  def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
               loss_reduction='sum_over_batch_size', loss_fn=None, name=None):
    self._weight_column = weight_column
    self._thresholds = _check_thresholds(thresholds)
    self._label_vocabulary = _check_vocabulary(label_vocabulary, 2)
    _check_loss_reduction(loss_reduction)
    self._loss_reduction = loss_reduction
    self._loss_fn = _check_loss_fn(loss_fn)
    self._name = name
    self._n_classes = 2

  @property
  def logits_dimension(self):
    return 1

  def _processed_labels(self, logits, labels):
    labels = tf.cast(self._label_ids(logits, labels), tf.float32)
    return _check_label_range(labels, 2)

  def _unweighted_loss_and_weights(self, logits, labels, features):
    if self._loss_fn:
      loss = _call_loss_fn(self._loss_fn, labels, logits, features, 1)
    else:
      loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return loss, _weights(features, self._weight_column, logits)

  def predictions(self, logits, keys=None):
    """The predictions dict (all of TF's keys, or `keys`)."""
    keys = _prediction_keys(keys, [
        PredictionKeys.LOGITS, PredictionKeys.LOGISTIC, PredictionKeys.PROBABILITIES,
        PredictionKeys.CLASS_IDS, PredictionKeys.CLASSES, PredictionKeys.ALL_CLASS_IDS,
        PredictionKeys.ALL_CLASSES])
    logits = _check_logits(logits, 1)
    predictions = {}
    with tf.compat.v1.name_scope('predictions'):
      if PredictionKeys.LOGITS in keys:
        predictions[PredictionKeys.LOGITS] = logits
      if PredictionKeys.LOGISTIC in keys:
        predictions[PredictionKeys.LOGISTIC] = tf.sigmoid(
            logits, name=PredictionKeys.LOGISTIC)
      two_class_logits = tf.concat([tf.zeros_like(logits), logits], axis=-1,
                                   name='two_class_logits')
      if PredictionKeys.PROBABILITIES in keys:
        predictions[PredictionKeys.PROBABILITIES] = tf.nn.softmax(
            two_class_logits, name=PredictionKeys.PROBABILITIES)
      return self._class_outputs(predictions, two_class_logits, keys)

  def metrics(self, regularization_losses=None):
    """The metric objects of `evaluate()`, by key."""
    k = self._summary_key
    label_mean = metrics_lib.Mean(k(MetricKeys.LABEL_MEAN))
    metrics = {k(key): metric(k(key)) for key, metric in (
        (MetricKeys.LOSS_MEAN, metrics_lib.Mean),
        (MetricKeys.ACCURACY, metrics_lib.Accuracy),
        (MetricKeys.PRECISION, metrics_lib.Precision),
        (MetricKeys.RECALL, metrics_lib.Recall),
        (MetricKeys.PREDICTION_MEAN, metrics_lib.Mean))}
    metrics[k(MetricKeys.LABEL_MEAN)] = label_mean
    metrics[k(MetricKeys.ACCURACY_BASELINE)] = metrics_lib.AccuracyBaseline(label_mean)
    metrics[k(MetricKeys.AUC)] = metrics_lib.AUC(k(MetricKeys.AUC))
    metrics[k(MetricKeys.AUC_PR)] = metrics_lib.AUC(k(MetricKeys.AUC_PR), curve='PR')
    metrics.update(_threshold_metrics(self._thresholds, k))
    return self._regularization_metric(metrics, regularization_losses)

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Adds this batch's updates to `eval_metrics` (from `metrics()`)."""
    k = self._summary_key
    predictions = self.predictions(logits)
    class_ids = predictions[PredictionKeys.CLASS_IDS]
    logistic = predictions[PredictionKeys.LOGISTIC]
    logits = _check_logits(logits, 1)
    labels = self._processed_labels(logits, labels)
    unweighted, weights = self._unweighted_loss_and_weights(logits, labels, features)
    eval_metrics[k(MetricKeys.LOSS_MEAN)].update_state(unweighted, weights)
    for key in (MetricKeys.ACCURACY, MetricKeys.PRECISION, MetricKeys.RECALL):
      eval_metrics[k(key)].update_state(labels, class_ids, weights)
    eval_metrics[k(MetricKeys.PREDICTION_MEAN)].update_state(logistic, weights)
    eval_metrics[k(MetricKeys.LABEL_MEAN)].update_state(labels, weights)
    for key in (MetricKeys.AUC, MetricKeys.AUC_PR):
      eval_metrics[k(key)].update_state(labels, logistic, weights)
    self._update_regularization(eval_metrics, regularization_losses)
    for threshold in self._thresholds:
      for key in (MetricKeys.ACCURACY_AT_THRESHOLD, MetricKeys.PRECISION_AT_THRESHOLD,
                  MetricKeys.RECALL_AT_THRESHOLD):
        eval_metrics[k(key % threshold)].update_state(labels, logistic, weights)
    return eval_metrics

  def _export_outputs(self, predictions):
    classification = export_lib.ClassificationOutput(
        scores=predictions[PredictionKeys.PROBABILITIES],
        classes=_all_classes(predictions[PredictionKeys.PROBABILITIES], 2,
                             self._label_vocabulary))
    return {DEFAULT_SERVING_KEY: classification, CLASSIFY_SERVING_KEY: classification,
            REGRESS_SERVING_KEY: export_lib.RegressionOutput(
                predictions[PredictionKeys.LOGISTIC]),
            PREDICT_SERVING_KEY: export_lib.PredictOutput(predictions)}


class MultiClassHead(_ClassHead):
  """`n_classes` > 2 classes, softmax cross entropy: `tf.estimator.MultiClassHead`.

  Args:
    n_classes: The number of classes, > 2.
    weight_column, label_vocabulary, loss_reduction, loss_fn, name: As for
      `BinaryClassHead` (`label_vocabulary` has `n_classes` strings).

  Raises:
    ValueError: `n_classes` not > 2, or a bad vocabulary, reduction or loss_fn.
  """

  def __init__(self, n_classes, weight_column=None, label_vocabulary=None,
               loss_reduction='sum_over_batch_size', loss_fn=None, name=None):
    if not isinstance(n_classes, int) or isinstance(n_classes, bool) or n_classes <= 2:
      raise ValueError(f'n_classes must be an int > 2: {n_classes!r}. For two '
                       'classes use BinaryClassHead (or n_classes=2 in a classifier).')
    self._n_classes = n_classes
    self._weight_column = weight_column
    self._label_vocabulary = _check_vocabulary(label_vocabulary, n_classes)
    _check_loss_reduction(loss_reduction)
    self._loss_reduction = loss_reduction
    self._loss_fn = _check_loss_fn(loss_fn)
    self._name = name

  @property
  def logits_dimension(self):
    return self._n_classes

  def _processed_labels(self, logits, labels):
    return _check_label_range(self._label_ids(logits, labels), self._n_classes)

  def _unweighted_loss_and_weights(self, logits, label_ids, features):
    if self._loss_fn:
      loss = _call_loss_fn(self._loss_fn, label_ids, logits, features, 1)
    else:
      loss = tf.expand_dims(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.squeeze(label_ids, -1), logits=logits), -1)
    return loss, _weights(features, self._weight_column, logits)

  def predictions(self, logits, keys=None):
    """The predictions dict (all of TF's keys, or `keys`)."""
    keys = _prediction_keys(keys, [
        PredictionKeys.LOGITS, PredictionKeys.PROBABILITIES, PredictionKeys.CLASS_IDS,
        PredictionKeys.CLASSES, PredictionKeys.ALL_CLASS_IDS, PredictionKeys.ALL_CLASSES])
    logits = _check_logits(logits, self._n_classes)
    predictions = {}
    with tf.compat.v1.name_scope('predictions'):
      if PredictionKeys.LOGITS in keys:
        predictions[PredictionKeys.LOGITS] = logits
      if PredictionKeys.PROBABILITIES in keys:
        predictions[PredictionKeys.PROBABILITIES] = tf.nn.softmax(
            logits, name=PredictionKeys.PROBABILITIES)
      return self._class_outputs(predictions, logits, keys)

  def metrics(self, regularization_losses=None):
    """The metric objects of `evaluate()`, by key."""
    k = self._summary_key
    metrics = {k(MetricKeys.LOSS_MEAN): metrics_lib.Mean(k(MetricKeys.LOSS_MEAN)),
               k(MetricKeys.ACCURACY): metrics_lib.Accuracy(k(MetricKeys.ACCURACY))}
    return self._regularization_metric(metrics, regularization_losses)

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Adds this batch's updates to `eval_metrics` (from `metrics()`)."""
    k = self._summary_key
    class_ids = self.predictions(logits, [PredictionKeys.CLASS_IDS])[
        PredictionKeys.CLASS_IDS]
    logits = _check_logits(logits, self._n_classes)
    label_ids = self._processed_labels(logits, labels)
    unweighted, weights = self._unweighted_loss_and_weights(logits, label_ids, features)
    eval_metrics[k(MetricKeys.LOSS_MEAN)].update_state(unweighted, weights)
    eval_metrics[k(MetricKeys.ACCURACY)].update_state(label_ids, class_ids, weights)
    self._update_regularization(eval_metrics, regularization_losses)
    return eval_metrics

  def _export_outputs(self, predictions):
    return _classification_outputs(predictions, self._n_classes, self._label_vocabulary)


def _classification_outputs(predictions, n_classes, label_vocabulary):
  """The serving signatures of a head scoring `n_classes` classes by probability."""
  scores = predictions[PredictionKeys.PROBABILITIES]
  classification = export_lib.ClassificationOutput(
      scores=scores, classes=_all_classes(scores, n_classes, label_vocabulary))
  return {DEFAULT_SERVING_KEY: classification, CLASSIFY_SERVING_KEY: classification,
          PREDICT_SERVING_KEY: export_lib.PredictOutput(predictions)}


class MultiLabelHead(Head):
  """Independent yes/no labels, sigmoid cross entropy: `tf.estimator.MultiLabelHead`.

  Labels are an indicator tensor `[batch_size, n_classes]` of 0/1, or a
  SparseTensor of class ids (or of strings, with `label_vocabulary`).

  Args:
    n_classes: The number of labels, > 1.
    weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn, name:
      As for `BinaryClassHead`.
    classes_for_class_based_metrics: Class ids (or vocabulary strings) that get
      their own probability mean and AUCs.

  Raises:
    ValueError: a bad n_classes, vocabulary, threshold, class, reduction or
      loss_fn, named.
  """

  def __init__(self, n_classes, weight_column=None, thresholds=None,
               label_vocabulary=None, loss_reduction='sum_over_batch_size',
               loss_fn=None, classes_for_class_based_metrics=None, name=None):
    if not isinstance(n_classes, int) or n_classes < 2:
      raise ValueError(f'n_classes must be > 1 for multi-label classification. '
                       f'Given: {n_classes!r}')
    self._n_classes = n_classes
    self._weight_column = weight_column
    self._thresholds = _check_thresholds(thresholds)
    self._label_vocabulary = _check_vocabulary(label_vocabulary, n_classes)
    _check_loss_reduction(loss_reduction)
    self._loss_reduction = loss_reduction
    self._loss_fn = _check_loss_fn(loss_fn)
    self._name = name
    classes = []
    for cls in classes_for_class_based_metrics or ():
      if isinstance(cls, str):
        if not self._label_vocabulary or cls not in self._label_vocabulary:
          raise ValueError(f'classes_for_class_based_metrics has {cls!r}, which is '
                           f'not in label_vocabulary={self._label_vocabulary}.')
        cls = self._label_vocabulary.index(cls)
      elif not 0 <= cls < n_classes:
        raise ValueError(f'All classes_for_class_based_metrics must be in range '
                         f'[0, {n_classes - 1}]. Given: {cls}')
      classes.append(cls)
    self._classes = tuple(classes)

  @property
  def logits_dimension(self):
    return self._n_classes

  def _class_key(self, template_at_class, template_at_name, class_id):
    if self._label_vocabulary is None:
      return self._summary_key(template_at_class % class_id)
    return self._summary_key(template_at_name % self._label_vocabulary[class_id])

  def _processed_labels(self, logits, labels):
    if labels is None:
      raise ValueError('You must provide a labels Tensor. Given: None.')
    if isinstance(labels, tf.SparseTensor):
      if labels.dtype == tf.string:
        if not self._label_vocabulary:
          raise ValueError('String labels need the head\'s label_vocabulary.')
        labels = tf.SparseTensor(labels.indices,
                                 _class_id_lookup(labels.values, self._label_vocabulary),
                                 labels.dense_shape)
      elif not labels.dtype.is_integer:
        raise ValueError(f'Labels dtype should be integer. Instead got '
                         f'{labels.dtype.name}.')
      values = _check_label_range(
          labels.values, self._n_classes,
          f'labels must be an integer SparseTensor with values in [0, {self._n_classes})')
      with tf.control_dependencies([values]):
        labels = tf.cast(tf.sparse.to_indicator(labels, self._n_classes), tf.int64)
    else:
      labels = _check_label_range(
          labels, 2, 'labels must be an integer indicator Tensor with values in [0, 1]')
    return _check_labels(labels, logits, self._n_classes)

  def _unweighted_loss_and_weights(self, logits, labels, features):
    if self._loss_fn:
      loss = _call_loss_fn(self._loss_fn, labels, logits, features, 1)
    else:
      loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.float32), logits=logits), axis=-1, keepdims=True)
    return loss, _weights(features, self._weight_column, logits)

  def predictions(self, logits, keys=None):
    """The predictions dict (all of TF's keys, or `keys`)."""
    keys = _prediction_keys(keys, [PredictionKeys.LOGITS, PredictionKeys.PROBABILITIES,
                                   PredictionKeys.CLASSES])
    logits = _check_logits(logits, self._n_classes)
    predictions = {}
    with tf.compat.v1.name_scope('predictions'):
      if PredictionKeys.LOGITS in keys:
        predictions[PredictionKeys.LOGITS] = logits
      if PredictionKeys.PROBABILITIES in keys:
        predictions[PredictionKeys.PROBABILITIES] = tf.sigmoid(
            logits, name=PredictionKeys.PROBABILITIES)
      if PredictionKeys.CLASSES in keys:
        predictions[PredictionKeys.CLASSES] = _all_classes(
            logits, self._n_classes, self._label_vocabulary)
      return predictions

  def metrics(self, regularization_losses=None):
    """The metric objects of `evaluate()`, by key."""
    k = self._summary_key
    metrics = {k(MetricKeys.LOSS_MEAN): metrics_lib.Mean(k(MetricKeys.LOSS_MEAN)),
               k(MetricKeys.AUC): metrics_lib.AUC(k(MetricKeys.AUC)),
               k(MetricKeys.AUC_PR): metrics_lib.AUC(k(MetricKeys.AUC_PR), curve='PR')}
    self._regularization_metric(metrics, regularization_losses)
    metrics.update(_threshold_metrics(self._thresholds, k))
    for class_id in self._classes:
      key = self._class_key(MetricKeys.PROBABILITY_MEAN_AT_CLASS,
                            MetricKeys.PROBABILITY_MEAN_AT_NAME, class_id)
      metrics[key] = metrics_lib.Mean(key)
      key = self._class_key(MetricKeys.AUC_AT_CLASS, MetricKeys.AUC_AT_NAME, class_id)
      metrics[key] = metrics_lib.AUC(key)
      key = self._class_key(MetricKeys.AUC_PR_AT_CLASS, MetricKeys.AUC_PR_AT_NAME,
                            class_id)
      metrics[key] = metrics_lib.AUC(key, curve='PR')
    return metrics

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Adds this batch's updates to `eval_metrics` (from `metrics()`)."""
    k = self._summary_key
    logits = _check_logits(logits, self._n_classes)
    labels = self._processed_labels(logits, labels)
    unweighted, weights = self._unweighted_loss_and_weights(logits, labels, features)
    probabilities = self.predictions(logits, [PredictionKeys.PROBABILITIES])[
        PredictionKeys.PROBABILITIES]
    eval_metrics[k(MetricKeys.LOSS_MEAN)].update_state(unweighted, weights)
    for key in (MetricKeys.AUC, MetricKeys.AUC_PR):
      eval_metrics[k(key)].update_state(labels, probabilities, weights)
    self._update_regularization(eval_metrics, regularization_losses)
    for threshold in self._thresholds:
      for key in (MetricKeys.ACCURACY_AT_THRESHOLD, MetricKeys.PRECISION_AT_THRESHOLD,
                  MetricKeys.RECALL_AT_THRESHOLD):
        eval_metrics[k(key % threshold)].update_state(labels, probabilities, weights)
    for class_id in self._classes:
      class_probabilities = probabilities[..., class_id:class_id + 1]
      class_labels = labels[..., class_id:class_id + 1]
      eval_metrics[self._class_key(MetricKeys.PROBABILITY_MEAN_AT_CLASS,
                                   MetricKeys.PROBABILITY_MEAN_AT_NAME,
                                   class_id)].update_state(class_probabilities, weights)
      for at_class, at_name in ((MetricKeys.AUC_AT_CLASS, MetricKeys.AUC_AT_NAME),
                                (MetricKeys.AUC_PR_AT_CLASS, MetricKeys.AUC_PR_AT_NAME)):
        eval_metrics[self._class_key(at_class, at_name, class_id)].update_state(
            class_labels, class_probabilities, weights)
    return eval_metrics

  def _export_outputs(self, predictions):
    return _classification_outputs(predictions, self._n_classes, self._label_vocabulary)


class RegressionHead(Head):
  """Real-valued labels, mean squared error: `tf.estimator.RegressionHead`.

  Args:
    label_dimension: The number of values per example.
    weight_column: A feature name or numeric column of example (or per-value)
      weights.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
    loss_fn: `loss_fn(labels, logits[, features])`, the unreduced loss.
    inverse_link_fn: Maps logits to predictions (then `logits` is predicted too).
    name: Suffix of the metric and summary keys.

  Raises:
    ValueError: label_dimension < 1, or a bad reduction or loss_fn.
  """

  def __init__(self, label_dimension=1, weight_column=None,
               loss_reduction='sum_over_batch_size', loss_fn=None,
               inverse_link_fn=None, name=None):
    if not isinstance(label_dimension, int) or label_dimension < 1:
      raise ValueError(f'Invalid label_dimension {label_dimension!r}: give an int >= 1.')
    self._logits_dimension = label_dimension
    self._weight_column = weight_column
    _check_loss_reduction(loss_reduction)
    self._loss_reduction = loss_reduction
    self._loss_fn = _check_loss_fn(loss_fn)
    self._inverse_link_fn = inverse_link_fn
    self._name = name

  @property
  def logits_dimension(self):
    return self._logits_dimension

  def _processed_labels(self, logits, labels):
    return tf.cast(_check_labels(labels, logits, self._logits_dimension), tf.float32)

  def _unweighted_loss_and_weights(self, logits, labels, features):
    if self._loss_fn:
      loss = _call_loss_fn(self._loss_fn, labels, logits, features,
                           self._logits_dimension)
    else:
      loss = tf.square(logits - labels)
    return loss, _weights(features, self._weight_column, logits, allow_per_logit=True)

  def predictions(self, logits, keys=None):
    """`predictions` (and `logits`, with an inverse link function)."""
    del keys
    logits = _check_logits(logits, self._logits_dimension)
    with tf.compat.v1.name_scope('predictions'):
      if self._inverse_link_fn:
        return {PredictionKeys.PREDICTIONS: self._inverse_link_fn(logits),
                PredictionKeys.LOGITS: logits}
      return {PredictionKeys.PREDICTIONS: logits}

  def metrics(self, regularization_losses=None):
    """The metric objects of `evaluate()`, by key."""
    k = self._summary_key
    metrics = {k(key): metrics_lib.Mean(k(key)) for key in (
        MetricKeys.LOSS_MEAN, MetricKeys.PREDICTION_MEAN, MetricKeys.LABEL_MEAN)}
    return self._regularization_metric(metrics, regularization_losses)

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Adds this batch's updates to `eval_metrics` (from `metrics()`)."""
    k = self._summary_key
    predicted = self.predictions(logits)[PredictionKeys.PREDICTIONS]
    logits = _check_logits(logits, self._logits_dimension)
    processed = self._processed_labels(logits, labels)
    unweighted, weights = self._unweighted_loss_and_weights(logits, processed, features)
    eval_metrics[k(MetricKeys.LOSS_MEAN)].update_state(unweighted, weights)
    eval_metrics[k(MetricKeys.LABEL_MEAN)].update_state(processed, weights)
    eval_metrics[k(MetricKeys.PREDICTION_MEAN)].update_state(predicted, weights)
    self._update_regularization(eval_metrics, regularization_losses)
    return eval_metrics

  def _export_outputs(self, predictions):
    regression = export_lib.RegressionOutput(predictions[PredictionKeys.PREDICTIONS])
    return {DEFAULT_SERVING_KEY: regression, REGRESS_SERVING_KEY: regression,
            PREDICT_SERVING_KEY: export_lib.PredictOutput(predictions)}


class PoissonRegressionHead(RegressionHead):
  """Counts, Poisson loss on log-rates; predicts `exp(logits)`:
  `tf.estimator.PoissonRegressionHead`."""

  def __init__(self, label_dimension=1, weight_column=None,
               loss_reduction='sum_over_batch_size', compute_full_loss=True, name=None):
    self._compute_full_loss = compute_full_loss
    super().__init__(label_dimension=label_dimension, weight_column=weight_column,
                     loss_reduction=loss_reduction, loss_fn=self._poisson_loss,
                     inverse_link_fn=tf.math.exp, name=name)

  def _poisson_loss(self, labels, logits):
    return tf.nn.log_poisson_loss(targets=labels, log_input=logits,
                                  compute_full_loss=self._compute_full_loss)


class LogisticRegressionHead(RegressionHead):
  """Labels in [0, 1], sigmoid cross entropy; predicts `sigmoid(logits)`:
  `tf.estimator.LogisticRegressionHead`."""

  def __init__(self, weight_column=None, loss_reduction='sum_over_batch_size',
               name=None):
    super().__init__(label_dimension=1, weight_column=weight_column,
                     loss_reduction=loss_reduction, loss_fn=self._logistic_loss,
                     inverse_link_fn=tf.math.sigmoid, name=name)

  def _logistic_loss(self, labels, logits):
    labels = _check_label_range(labels, 2, 'Labels must be in range [0, 1]')
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


def binary_or_multi_class_head(n_classes, weight_column, label_vocabulary,
                               loss_reduction):
  """The head of a classifier of `n_classes` classes, as TF 2.15 chose it."""
  if not isinstance(n_classes, int) or isinstance(n_classes, bool) or n_classes < 2:
    raise ValueError(f'n_classes={n_classes!r}: a classifier needs an int n_classes '
                     '>= 2 (2, the default, is binary classification).')
  if n_classes == 2:
    return BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary,
                           loss_reduction=loss_reduction)
  return MultiClassHead(n_classes, weight_column=weight_column,
                        label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
