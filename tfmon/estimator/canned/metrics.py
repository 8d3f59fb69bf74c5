"""The evaluation metrics of TF 2.15's heads, in graph mode.

TF 2.15's heads measured with Keras 2 metric objects, which need Keras 2's graph
mode; these have the same update rules and results (`Mean`, `Accuracy`,
`Precision`, `Recall`, `AUC` with 200 thresholds and Keras' interpolations):
each holds local variables, the update ops of the batches it was given, and its
result. `eval_metric_ops` turns them into EstimatorSpec's pairs.
"""

import numpy as np
import tensorflow as tf


def _metric_variable(shape, name):
  return tf.compat.v1.Variable(
      lambda: tf.zeros(shape, tf.float32), trainable=False, name=name,
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                   tf.compat.v1.GraphKeys.METRIC_VARIABLES])


def _weights_like(sample_weight, values):
  if sample_weight is None:
    return tf.ones_like(values)
  return tf.cast(sample_weight, tf.float32) * tf.ones_like(values)


class Mean:
  """The weighted mean of the values seen, as `tf.keras.metrics.Mean`."""

  def __init__(self, name):
    self.name = name
    self.total = _metric_variable([], 'total')
    self.count = _metric_variable([], 'count')
    self.updates = []

  def update_state(self, values, sample_weight=None):
    values = tf.cast(values, tf.float32)
    weights = _weights_like(sample_weight, values)
    total = tf.compat.v1.assign_add(self.total, tf.reduce_sum(values * weights))
    # After the total, which reads the batch: constant weights must not count
    # the run that finds the input exhausted.
    with tf.control_dependencies([total]):
      self.updates.append(tf.compat.v1.assign_add(self.count, tf.reduce_sum(weights)))

  def result(self):
    return tf.math.divide_no_nan(self.total, self.count)


class Accuracy(Mean):
  """How often predictions equal labels (`threshold`: predictions above it are
  1), as `tf.keras.metrics.Accuracy` and `BinaryAccuracy`."""

  def __init__(self, name, threshold=None):
    super().__init__(name)
    self._threshold = threshold

  def update_state(self, y_true, y_pred, sample_weight=None):  # pylint: disable=arguments-renamed
    y_true = tf.cast(y_true, tf.float32)
    y_pred = tf.cast(y_pred, tf.float32)
    if self._threshold is not None:
      y_pred = tf.cast(y_pred > self._threshold, tf.float32)
    super().update_state(tf.cast(tf.equal(y_true, y_pred), tf.float32), sample_weight)


class AccuracyBaseline:
  """The accuracy of always predicting the majority label, from `label/mean`."""

  def __init__(self, label_mean):
    self.name = 'accuracy_baseline'
    self._label_mean = label_mean
    self.updates = []

  def result(self):
    total, count = self._label_mean.total, self._label_mean.count
    return tf.math.divide_no_nan(tf.maximum(total, count - total), count)


class _Confusion:
  """True/false positive/negative counts at thresholds (Keras' rule: a
  prediction above a threshold is positive)."""

  def __init__(self, name, thresholds):
    self.name = name
    self.thresholds = np.asarray(thresholds, np.float32)
    shape = [len(self.thresholds)]
    self.tp, self.fp, self.tn, self.fn = (_metric_variable(shape, n) for n in
                                          ('true_positives', 'false_positives',
                                           'true_negatives', 'false_negatives'))
    self.updates = []

  def update_state(self, y_true, y_pred, sample_weight=None):
    y_pred = tf.cast(y_pred, tf.float32)
    weights = tf.reshape(_weights_like(sample_weight, y_pred), [-1, 1])
    label = tf.reshape(tf.cast(tf.cast(y_true, tf.bool), tf.float32), [-1, 1])
    above = tf.cast(tf.reshape(y_pred, [-1, 1]) > self.thresholds[None, :], tf.float32)
    for variable, value in ((self.tp, label * above), (self.fp, (1 - label) * above),
                            (self.tn, (1 - label) * (1 - above)),
                            (self.fn, label * (1 - above))):
      self.updates.append(tf.compat.v1.assign_add(
          variable, tf.reduce_sum(value * weights, axis=0)))


class Precision(_Confusion):
  """tp / (tp + fp) at `threshold`, as `tf.keras.metrics.Precision`."""

  def __init__(self, name, threshold=0.5):
    super().__init__(name, [threshold])

  def result(self):
    return tf.math.divide_no_nan(self.tp, self.tp + self.fp)[0]


class Recall(_Confusion):
  """tp / (tp + fn) at `threshold`, as `tf.keras.metrics.Recall`."""

  def __init__(self, name, threshold=0.5):
    super().__init__(name, [threshold])

  def result(self):
    return tf.math.divide_no_nan(self.tp, self.tp + self.fn)[0]


class AUC(_Confusion):
  """The area under the ROC or PR curve, as `tf.keras.metrics.AUC` computed it:
  200 thresholds, trapezoids for ROC, Davis & Goadrich's interpolation for PR."""

  def __init__(self, name, curve='ROC', num_thresholds=200):
    inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    super().__init__(name, [-1e-7] + inner + [1.0 + 1e-7])
    self._curve = curve

  def result(self):
    tp, fp, tn, fn = self.tp, self.fp, self.tn, self.fn
    if self._curve == 'PR':
      dtp = tp[:-1] - tp[1:]
      p = tp + fp
      dp = p[:-1] - p[1:]
      slope = tf.math.divide_no_nan(dtp, tf.maximum(dp, 0))
      intercept = tp[1:] - slope * p[1:]
      ratio = tf.where(tf.logical_and(p[:-1] > 0, p[1:] > 0),
                       tf.math.divide_no_nan(p[:-1], tf.maximum(p[1:], 0)),
                       tf.ones_like(p[1:]))
      return tf.reduce_sum(tf.math.divide_no_nan(
          slope * (dtp + intercept * tf.math.log(ratio)), tf.maximum(tp[1:] + fn[1:], 0)))
    recall = tf.math.divide_no_nan(tp, tp + fn)
    fp_rate = tf.math.divide_no_nan(fp, fp + tn)
    return tf.reduce_sum((fp_rate[:-1] - fp_rate[1:]) * (recall[:-1] + recall[1:]) / 2.)


def eval_metric_ops(metrics):
  """EstimatorSpec's `(value, update_op)` pairs of graph metrics."""
  return {key: (metric.result(), tf.group(*metric.updates))
          for key, metric in metrics.items()}
