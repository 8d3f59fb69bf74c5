"""ModeKeys and EstimatorSpec, with tf.estimator's names and checks (RunConfig:
run_config.py, imported here too)."""

import collections

import tensorflow as tf

from tfmon import arg_checks
from tfmon.estimator.run_config import RunConfig  # pylint: disable=unused-import


class ModeKeys:
  """The modes a `model_fn` is called in, with tf.estimator's values."""
  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'


_SPEC_FIELDS = ('mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops',
                'export_outputs', 'training_chief_hooks', 'training_hooks',
                'scaffold', 'evaluation_hooks', 'prediction_hooks')


class EstimatorSpec(collections.namedtuple('EstimatorSpec', _SPEC_FIELDS)):
  """What a `model_fn` returns, checked as tf.estimator checked it.

  Raises:
    ValueError: a TRAIN spec without `loss` or `train_op`, an EVAL spec without
      `loss`, a PREDICT spec without `predictions`, or a mode that is not a
      ModeKeys value.
    TypeError: hooks that are not SessionRunHooks, metrics that are not
      `(value, update_op)` pairs.
  """

  def __new__(cls, mode, predictions=None, loss=None, train_op=None,
              eval_metric_ops=None, export_outputs=None, training_chief_hooks=None,
              training_hooks=None, scaffold=None, evaluation_hooks=None,
              prediction_hooks=None):
    if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
      raise ValueError(f'mode={mode!r} is not one of tfmon.estimator.ModeKeys '
                       "('train', 'eval', 'infer').")
    if mode == ModeKeys.TRAIN and train_op is None:
      raise ValueError('Missing train_op.')
    if mode in (ModeKeys.TRAIN, ModeKeys.EVAL) and loss is None:
      raise ValueError('Missing loss.')
    if mode == ModeKeys.PREDICT and predictions is None:
      raise ValueError('Missing predictions.')
    for name, pair in (eval_metric_ops or {}).items():
      if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        raise TypeError(f'eval_metric_ops[{name!r}] must be a (metric_tensor, '
                        f'update_op) tuple, as tf.compat.v1.metrics return; got {pair!r}.')
    hooks = {}
    for name, value in (('training_chief_hooks', training_chief_hooks),
                        ('training_hooks', training_hooks),
                        ('evaluation_hooks', evaluation_hooks),
                        ('prediction_hooks', prediction_hooks)):
      hooks[name] = tuple(arg_checks.check_list_of(
          value, tf.compat.v1.train.SessionRunHook, name, 'hook') or ())
    return super().__new__(
        cls, mode, predictions, loss, train_op, dict(eval_metric_ops or {}),
        export_outputs, hooks['training_chief_hooks'], hooks['training_hooks'],
        scaffold, hooks['evaluation_hooks'], hooks['prediction_hooks'])
