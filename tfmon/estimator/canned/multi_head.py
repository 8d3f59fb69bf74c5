"""MultiHead: several named heads on one model (`tf.estimator.MultiHead`)."""

import tensorflow as tf

from tfmon.estimator import export as export_lib
from tfmon.estimator.canned import metrics as metrics_lib
from tfmon.estimator.canned.head import (DEFAULT_SERVING_KEY, PREDICT_SERVING_KEY,
                                         REDUCTIONS, Head, MetricKeys, summaries,
                                         train_op)
from tfmon.estimator.spec import EstimatorSpec, ModeKeys


class MultiHead(Head):
  """Several named heads on one model: `tf.estimator.MultiHead`.

  The logits are split among the heads in order (or given as a dict by head
  name); labels are a dict by head name; the loss is the (weighted) sum of the
  heads' losses; predictions are keyed `(head_name, key)`.

  Args:
    heads: Heads, each with a `name`.
    head_weights: A weight per head for the loss.

  Raises:
    ValueError: no heads, a head without a name, or weights that do not match.
  """

  def __init__(self, heads, head_weights=None):
    if not heads:
      raise ValueError(f'Must specify heads. Given: {heads!r}')
    if head_weights and len(head_weights) != len(heads):
      raise ValueError(f'heads and head_weights must have the same size. Given '
                       f'len(heads): {len(heads)}. Given len(head_weights): '
                       f'{len(head_weights)}.')
    for head in heads:
      if head.name is None:
        raise ValueError(f'All given heads must have name specified. Given: {head!r}')
    self._heads = tuple(heads)
    self._head_weights = tuple(head_weights or ())
    self._name = '_'.join(h.name for h in self._heads)

  @property
  def logits_dimension(self):
    return sum(h.logits_dimension for h in self._heads)

  @property
  def loss_reduction(self):
    reductions = {REDUCTIONS[h.loss_reduction] for h in self._heads}
    if len(reductions) > 1:
      raise ValueError(f'The loss_reduction must be the same for different heads. '
                       f'Given: {[h.loss_reduction for h in self._heads]}')
    return self._heads[0].loss_reduction

  def _logits_by_head(self, logits, labels=None):
    names = [h.name for h in self._heads]
    if labels is not None:
      if not isinstance(labels, dict):
        raise ValueError(f'labels must be a dict by head name {names}. Given: {labels!r}')
      missing = sorted(set(names) - set(labels))
      if missing:
        raise ValueError(f'labels has missing values for head(s): {missing}')
    if isinstance(logits, dict):
      missing = sorted(set(names) - set(logits))
      if missing:
        raise ValueError(f'logits has missing values for head(s): {missing}')
      return logits
    logits = tf.convert_to_tensor(logits)
    dimensions = [h.logits_dimension for h in self._heads]
    if logits.shape[-1] is not None and logits.shape[-1] != sum(dimensions):
      raise ValueError(f'Could not split logits of shape {logits.shape} among the heads '
                       f'with logits dimensions {dimensions}: the last dimension should '
                       f'be {sum(dimensions)}.')
    with tf.compat.v1.name_scope('split_logits'):
      return dict(zip(names, tf.split(logits, dimensions, axis=-1)))

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    """The sum of the heads' losses (times `head_weights`), plus regularization."""
    by_head = self._logits_by_head(logits, labels)
    losses = [h.loss(labels[h.name], by_head[h.name], features, mode)
              for h in self._heads]
    with tf.compat.v1.name_scope('merge_losses'):
      if self._head_weights:
        losses = [loss * weight for loss, weight in zip(losses, self._head_weights)]
      loss = tf.math.add_n(losses)
      if regularization_losses is not None:
        loss += tf.math.add_n(regularization_losses)
      return loss

  def predictions(self, logits, keys=None):
    """Each head's predictions, keyed `(head_name, key)`."""
    del keys
    by_head = self._logits_by_head(logits)
    with tf.compat.v1.name_scope('merge_pred'):
      return {(h.name, key): value for h in self._heads
              for key, value in h.predictions(by_head[h.name]).items()}

  def metrics(self, regularization_losses=None):
    """`loss/<head>` means (the heads' metrics join in `update_metrics`)."""
    keys = [f'{MetricKeys.LOSS}/{h.name}' for h in self._heads]
    metrics = {key: metrics_lib.Mean(key) for key in keys}
    if regularization_losses is not None:
      key = MetricKeys.LOSS_REGULARIZATION
      metrics[key] = metrics_lib.Mean(key)
    return metrics

  def update_metrics(self, eval_metrics, features, logits, labels, mode=None,
                     regularization_losses=None):
    """Adds every head's loss and metrics for this batch to `eval_metrics`."""
    by_head = self._logits_by_head(logits, labels)
    if regularization_losses is not None:
      eval_metrics[MetricKeys.LOSS_REGULARIZATION].update_state(
          tf.math.add_n(regularization_losses))
    for h in self._heads:
      eval_metrics[f'{MetricKeys.LOSS}/{h.name}'].update_state(
          h.loss(labels[h.name], by_head[h.name], features))
      eval_metrics.update(h.update_metrics(h.metrics(), features, by_head[h.name],
                                           labels[h.name]))
    return eval_metrics

  def _merged_export_outputs(self, specs):
    outputs, merged = {}, {}
    for i, (h, spec) in enumerate(zip(self._heads, specs)):
      head_outputs = spec.export_outputs
      if i == 0:
        outputs[DEFAULT_SERVING_KEY] = head_outputs[DEFAULT_SERVING_KEY]
      for key, output in head_outputs.items():
        outputs[h.name if key == DEFAULT_SERVING_KEY else f'{h.name}/{key}'] = output
        if key == PREDICT_SERVING_KEY:
          merged.update({f'{h.name}/{k}': v for k, v in output.outputs.items()})
    outputs[PREDICT_SERVING_KEY] = export_lib.PredictOutput(merged)
    return outputs

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    """The EstimatorSpec of `mode`; see `Head.create_estimator_spec`."""
    with tf.compat.v1.name_scope(self._name, 'multi_head'):
      by_head = self._logits_by_head(logits, labels)
      # Each head's own spec, as TF 2.15 made them: their export outputs serve,
      # and in training their summaries ('loss/<head>') and 'training' scopes.
      specs = [h.create_estimator_spec(
          features, mode, by_head[h.name], labels[h.name] if labels else None,
          train_op_fn=lambda _: tf.no_op()) for h in self._heads]
      predictions = self.predictions(logits)
      spec = self._spec_or_loss(mode, features, logits, labels, predictions,
                                lambda: self._merged_export_outputs(specs),
                                regularization_losses)
      if isinstance(spec, EstimatorSpec):
        return spec
      op = train_op(optimizer, trainable_variables, train_op_fn, update_ops, spec)
    summaries(spec, regularization_losses, lambda key: key)
    return EstimatorSpec(ModeKeys.TRAIN, predictions=predictions, loss=spec,
                         train_op=op)
