"""ModeKeys, EstimatorSpec and RunConfig, with tf.estimator's names and checks."""

import collections

import tensorflow as tf

from tfmon import arg_checks


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


_USE_DEFAULT = object()


class RunConfig:
  """The run configuration tf.estimator.RunConfig held, with its defaults.

  Args:
    model_dir: Where checkpoints and event files go (the Estimator's wins).
    tf_random_seed: The graph-level random seed.
    save_summary_steps: Record summaries every N steps.
    save_checkpoints_steps: Save every N steps (not with `save_checkpoints_secs`).
    save_checkpoints_secs: Save every N seconds (600 when neither is given; both
      None: no checkpoints, as TF1).
    keep_checkpoint_max: Checkpoints kept.
    keep_checkpoint_every_n_hours: Also keep one every N hours.
    log_step_count_steps: Log the loss and the step rate every N steps.
    train_distribute: Must be None: see the error.

  Raises:
    ValueError: both save_checkpoints_steps and save_checkpoints_secs, or a
      train_distribute strategy.
  """

  def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
               save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
               session_config=None, keep_checkpoint_max=5,
               keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
               train_distribute=None, **unused):
    del session_config, unused  # TF1 session settings: configure tf.config instead
    # TF1's defaults: every 600 seconds when neither is given; none when both
    # are given as None.
    if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_steps, save_checkpoints_secs = None, 600
    elif save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_secs = None
    elif save_checkpoints_steps is _USE_DEFAULT:
      save_checkpoints_steps = None
    elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
      raise ValueError('Can not provide both save_checkpoints_steps and '
                       'save_checkpoints_secs.')
    if train_distribute is not None:
      raise ValueError(
          f'train_distribute={train_distribute!r}: tfmon.estimator runs a model_fn '
          'in one process without a strategy. Train under a strategy with a step '
          'function and tfmon.train.MonitoredTrainingSession(strategy=...).')
    self.model_dir = model_dir
    self.tf_random_seed = tf_random_seed
    self.save_summary_steps = save_summary_steps
    self.save_checkpoints_steps = save_checkpoints_steps
    self.save_checkpoints_secs = save_checkpoints_secs
    self.keep_checkpoint_max = keep_checkpoint_max
    self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self.log_step_count_steps = log_step_count_steps
    self.train_distribute = None

  def replace(self, **kwargs):
    values = dict(vars(self), **kwargs)
    return RunConfig(**values)
