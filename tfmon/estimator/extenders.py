"""add_metrics: an Estimator evaluating more metrics, as tf.estimator's."""

import inspect

from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import ModeKeys

_METRIC_FN_ARGS = ('features', 'labels', 'predictions', 'config')


def add_metrics(estimator, metric_fn):
  """A new Estimator on `estimator`'s model_dir whose evaluation adds `metric_fn`'s.

  Args:
    estimator: A `tfmon.estimator.Estimator`.
    metric_fn: Takes any of `features`, `labels`, `predictions`, `config` (by
      name) and returns a dict of metric name to a `(value, update_op)` pair,
      as `tf.compat.v1.metrics` return them.

  Returns:
    An Estimator with the same model_dir, config and warm start, whose EVAL
    spec holds the model's metrics and `metric_fn`'s (which win on a clash).

  Raises:
    ValueError: a `metric_fn` taking other arguments.
    TypeError: an `estimator` that is not a tfmon Estimator.
  """
  if not isinstance(estimator, Estimator):
    raise TypeError(f'estimator={estimator!r} must be a tfmon.estimator.Estimator.')
  arguments = set(inspect.signature(metric_fn).parameters)
  invalid = sorted(arguments - set(_METRIC_FN_ARGS))
  if invalid:
    raise ValueError(f'metric_fn ({metric_fn}) has following not expected args: '
                     f'{invalid}; it takes any of {list(_METRIC_FN_ARGS)}.')
  model_fn = estimator.model_fn

  def new_model_fn(features, labels, mode, config):
    spec = model_fn(features, labels, mode, config)
    if mode != ModeKeys.EVAL:
      return spec
    available = {'features': features, 'labels': labels,
                 'predictions': spec.predictions, 'config': config}
    new_metrics = metric_fn(**{k: v for k, v in available.items() if k in arguments})
    # As EstimatorSpec checks them.
    metrics = dict(spec.eval_metric_ops or {}, **new_metrics)
    return type(spec)(**dict(spec._asdict(), eval_metric_ops=metrics))

  return Estimator(model_fn=new_model_fn, model_dir=estimator.model_dir,
                   config=estimator.config,
                   warm_start_from=estimator._warm_start_settings)  # pylint: disable=protected-access
