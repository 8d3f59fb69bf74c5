"""The optimizers of TF 2.15's premade estimators, in graph mode.

TF 2.15's premade estimators trained with Keras 2's legacy optimizers in graph
mode (`tf.keras.optimizers.legacy`): an optimizer named 'Adagrad' keeps its
hyperparameters in variables (`training/Adagrad/learning_rate`, `.../decay`),
its slots beside them (`training/Adagrad/dnn/logits/kernel/accumulator`), and
its step count in the global step (else in `training/<name>/iter`). Keras 3 has
no graph mode, so this module applies the same updates with the same public
`tf.raw_ops` kernels on variables of the same names: a model_dir TF 2.15 wrote
continues here, and one written here continues under TF 2.15.

An `optimizer` argument is, as TF 2.15 took it: a name ('Adagrad', 'Adam',
'Ftrl', 'RMSProp', 'SGD'), an optimizer instance (Keras 3's, or tf_keras' legacy
or new one: its class and `get_config()` choose the rule and hyperparameters),
or a callable returning one. A `tf.compat.v1.train.Optimizer` is also taken (as
TF's v1 estimators took it) and runs its own `minimize`.
"""

import re

import tensorflow as tf

_DEFAULTS = {  # Keras 2's legacy defaults, which TF 2.15's estimators used
    'Adagrad': dict(learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7),
    'Adam': dict(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False),
    'Ftrl': dict(learning_rate=0.001, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0),
    'RMSprop': dict(learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                    centered=False),
    'SGD': dict(learning_rate=0.01, momentum=0.0, nesterov=False),
}
# Hyperparameters held in variables, as Keras 2 held them (created sorted).
_HYPERS = {
    'Adagrad': ('learning_rate', 'decay'),
    'Adam': ('learning_rate', 'decay', 'beta_1', 'beta_2'),
    'Ftrl': ('learning_rate', 'decay', 'learning_rate_power',
             'l1_regularization_strength', 'l2_regularization_strength', 'beta'),
    'RMSprop': ('learning_rate', 'decay', 'rho', 'momentum'),
    'SGD': ('learning_rate', 'decay', 'momentum'),
}
_NAMES = {'Adagrad': 'Adagrad', 'Adam': 'Adam', 'Ftrl': 'Ftrl', 'RMSProp': 'RMSprop',
          'SGD': 'SGD'}  # the strings TF 2.15 accepted, to the rule's class name
# Settings of a Keras 3 (or tf_keras) instance this module does not apply.
_UNSUPPORTED = ('weight_decay', 'clipnorm', 'clipvalue', 'global_clipnorm',
                'use_ema', 'loss_scale_factor', 'gradient_accumulation_steps')


def get_optimizer(optimizer, learning_rate=None):
  """The optimizer an estimator's `optimizer` argument names, as TF 2.15 chose it.

  Args:
    optimizer: A name in ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), a Keras
      optimizer instance, a `tf.compat.v1.train.Optimizer`, or a callable
      returning one of those.
    learning_rate: The rate for a name (None: the optimizer's Keras default).

  Returns:
    A `GraphOptimizer`, or the `tf.compat.v1.train.Optimizer` given.

  Raises:
    ValueError: an unknown name, or an object that is no optimizer, or
      settings this module does not apply (named, with the fix).
  """
  if isinstance(optimizer, str):
    if optimizer not in _NAMES:
      raise ValueError(f'Unsupported optimizer name: {optimizer!r}. Supported names '
                       f'are: {tuple(sorted(_NAMES))}, or pass an optimizer instance '
                       '(tf.keras.optimizers.Adagrad(learning_rate=0.05)).')
    kind = _NAMES[optimizer]
    settings = {} if learning_rate is None else {'learning_rate': learning_rate}
    return GraphOptimizer(kind, **settings)
  if isinstance(optimizer, (GraphOptimizer, tf.compat.v1.train.Optimizer)):
    return optimizer
  if callable(optimizer) and not hasattr(optimizer, 'get_config'):
    return get_optimizer(optimizer(), learning_rate)
  if hasattr(optimizer, 'get_config'):
    with tf.init_scope():  # a Keras 3 optimizer reads its settings eagerly
      return _from_keras(optimizer)
  raise ValueError(f'optimizer={optimizer!r} is not an optimizer: give one of '
                   f'{tuple(sorted(_NAMES))}, a tf.keras optimizer instance, or a '
                   'callable returning one.')


def _from_keras(optimizer):
  """A GraphOptimizer applying what a Keras optimizer instance asks for."""
  kind = {'adagrad': 'Adagrad', 'adam': 'Adam', 'ftrl': 'Ftrl', 'rmsprop': 'RMSprop',
          'sgd': 'SGD'}.get(type(optimizer).__name__.lower())
  if kind is None:
    raise ValueError(
        f'optimizer {type(optimizer).__name__} is not one TF 2.15\'s premade '
        f'estimators ran here: use one of Adagrad, Adam, Ftrl, RMSprop, SGD.')
  config = optimizer.get_config()
  used = [k for k in _UNSUPPORTED if config.get(k) and not (
      k == 'gradient_accumulation_steps' and config[k] == 1)]
  if used:
    raise ValueError(
        f'optimizer {type(optimizer).__name__} sets {used}, which the premade '
        'estimators do not apply: leave them unset, or write a model_fn.')
  if not isinstance(config.get('learning_rate'), (int, float)):
    raise ValueError(
        f'optimizer {type(optimizer).__name__} has learning_rate='
        f'{config.get("learning_rate")!r}: the premade estimators take a number '
        '(a schedule needs a model_fn).')
  settings = {k: config[k] for k in _DEFAULTS[kind] if k in config}
  name = config.get('name')
  # Keras 3 names instances after their class in snake case, numbered
  # ('adagrad_1', 'rm_sprop'); TF 2.15's variables used Keras 2's, the class name.
  snake = re.sub('(.)([A-Z][a-z]+)', r'\1_\2', type(optimizer).__name__)
  snake = re.sub('([a-z])([A-Z])', r'\1_\2', snake).lower()  # Keras' to_snake_case
  if not name or re.sub(r'_[0-9]+$', '', name).lower() in (kind.lower(), snake):
    name = kind
  return GraphOptimizer(kind, name=name, decay=config.get('decay') or 0.0, **settings)


class GraphOptimizer:
  """One of Keras 2's legacy optimizers, as it ran in graph mode.

  Args:
    kind: 'Adagrad', 'Adam', 'Ftrl', 'RMSprop' or 'SGD'.
    name: The name of its variable scope (default: `kind`).
    decay: Keras 2's inverse-time decay of the learning rate per step.
    **settings: The rule's hyperparameters (Keras 2's names and defaults).

  Raises:
    ValueError: an unknown setting, or a value Keras 2 refused.
  """

  def __init__(self, kind, name=None, decay=0.0, **settings):
    unknown = sorted(set(settings) - set(_DEFAULTS[kind]))
    if unknown:
      raise ValueError(f'{kind} takes {sorted(_DEFAULTS[kind])}, not {unknown}.')
    self.kind = kind
    self.name = name or kind
    self.settings = dict(_DEFAULTS[kind], **settings)
    self.settings['decay'] = float(decay)
    if self.settings['learning_rate'] is None or self.settings['learning_rate'] < 0:
      raise ValueError(f'{kind} learning_rate={self.settings["learning_rate"]!r} '
                       'must be a number >= 0.')
    if self.settings.get('initial_accumulator_value', 0) < 0:
      raise ValueError(f'{kind} initial_accumulator_value must be >= 0.')
    self._step = None

  def __repr__(self):
    return f'GraphOptimizer({self.kind!r}, name={self.name!r}, {self.settings})'

  def get_updates(self, loss, variables, global_step=None):
    """The op applying one step to `variables`, made in the current graph.

    Creates the hyperparameter and slot variables under `<name scope>/<name>`
    (TF 2.15's heads called it in the `training` name scope), and counts the
    step in `global_step` when given, else in `<...>/<name>/iter`, as Keras 2
    did.

    Args:
      loss: A scalar tensor.
      variables: The variables to train.
      global_step: The variable counting this optimizer's steps, or None.

    Returns:
      The update op.
    """
    # Keras 2 named its variables by the name scope: '<caller's>/<name>', made
    # unique ('training/Adagrad_1' for a second Adagrad), as here.
    with tf.compat.v1.name_scope(self.name) as scope:
      scope = scope.rstrip('/')
      with tf.compat.v1.name_scope('gradients'):
        grads = tf.compat.v1.gradients(loss, variables)
      for grad, variable in zip(grads, variables):
        if grad is None:
          raise ValueError(f'Variable {variable.name} has no gradient from the loss.')
      with tf.compat.v1.variable_scope(tf.compat.v1.VariableScope(False, name=scope),
                                       auxiliary_name_scope=False):
        step = global_step
        if step is None:
          step = tf.compat.v1.get_variable(
              'iter', [], tf.int64, tf.compat.v1.zeros_initializer(), trainable=False)
        hypers = {name: tf.compat.v1.get_variable(
            name, [], tf.float32,
            tf.compat.v1.constant_initializer(self.settings[name]), trainable=False)
                  for name in sorted(_HYPERS[self.kind])}
        slots = [self._slots(v) for v in variables]
      lr = hypers['learning_rate']
      if self.settings['decay'] > 0:
        lr = lr / (1. + hypers['decay'] * tf.cast(step, tf.float32))
      updates = [self._apply(grad, variable, slot, lr, hypers, step)
                 for grad, variable, slot in zip(grads, variables, slots)]
      with tf.control_dependencies(updates):
        return tf.compat.v1.assign_add(step, 1).op

  def _slots(self, variable):
    """The slot variables of `variable`, named `<variable>/<slot>` in this scope."""
    def slot(name, value=0.0):
      return tf.compat.v1.get_variable(
          f'{variable.name.split(":")[0]}/{name}', variable.shape, variable.dtype,
          tf.compat.v1.constant_initializer(value), trainable=False)
    s = self.settings
    if self.kind == 'Adagrad':
      return {'accumulator': slot('accumulator', s['initial_accumulator_value'])}
    if self.kind == 'Ftrl':
      return {'accumulator': slot('accumulator', s['initial_accumulator_value']),
              'linear': slot('linear')}
    if self.kind == 'Adam':
      return dict({'m': slot('m'), 'v': slot('v')},
                  **({'vhat': slot('vhat')} if s['amsgrad'] else {}))
    if self.kind == 'RMSprop':
      slots = {'rms': slot('rms')}
      if s['momentum'] > 0:
        slots['momentum'] = slot('momentum')
      if s['centered']:
        slots['mg'] = slot('mg')
      return slots
    return {'momentum': slot('momentum')} if s['momentum'] > 0 else {}

  def _apply(self, grad, var, slots, lr, hypers, step):
    """One update of `var`: Keras 2's kernels, sparse ones for IndexedSlices."""
    s = self.settings
    sparse = isinstance(grad, tf.IndexedSlices)
    if sparse and (self.kind in ('Adagrad', 'Ftrl', 'SGD') or 'momentum' in slots):
      values, indices = _deduplicate(grad)  # Keras 2 updated the given rows only
    elif sparse:  # Adam and momentum-free RMSprop updated every row anyway
      grad, sparse = tf.convert_to_tensor(grad), False
    raw = tf.raw_ops
    if self.kind == 'Adagrad':
      eps = tf.constant(s['epsilon'], var.dtype)
      acc = slots['accumulator'].handle
      if sparse:
        return raw.ResourceSparseApplyAdagradV2(var=var.handle, accum=acc, lr=lr,
                                                epsilon=eps, grad=values, indices=indices)
      return raw.ResourceApplyAdagradV2(var=var.handle, accum=acc, lr=lr, epsilon=eps,
                                        grad=grad)
    if self.kind == 'Ftrl':
      l2 = hypers['l2_regularization_strength'] + hypers['beta'] / (2. * lr)
      args = dict(var=var.handle, accum=slots['accumulator'].handle,
                  linear=slots['linear'].handle, lr=lr,
                  l1=hypers['l1_regularization_strength'], l2=l2,
                  lr_power=hypers['learning_rate_power'])
      shrinkage = s['l2_shrinkage_regularization_strength']
      if shrinkage > 0:
        args['l2_shrinkage'] = tf.constant(shrinkage, var.dtype)
      if sparse:
        op = raw.ResourceSparseApplyFtrlV2 if shrinkage > 0 else raw.ResourceSparseApplyFtrl
        return op(grad=values, indices=indices, **args)
      return (raw.ResourceApplyFtrlV2 if shrinkage > 0 else raw.ResourceApplyFtrl)(
          grad=grad, **args)
    if self.kind == 'SGD':
      if 'momentum' in slots:
        args = dict(var=var.handle, accum=slots['momentum'].handle, lr=lr,
                    momentum=hypers['momentum'], use_nesterov=bool(s['nesterov']))
        if sparse:
          return raw.ResourceSparseApplyKerasMomentum(grad=values, indices=indices, **args)
        return raw.ResourceApplyKerasMomentum(grad=grad, **args)
      if sparse:
        return raw.ResourceScatterAdd(resource=var.handle, indices=indices,
                                      updates=-values * lr)
      return raw.ResourceApplyGradientDescent(var=var.handle, alpha=lr, delta=grad)
    eps = tf.constant(s['epsilon'], var.dtype)
    if self.kind == 'Adam':
      local_step = tf.cast(step + 1, var.dtype)
      beta_1, beta_2 = hypers['beta_1'], hypers['beta_2']
      args = dict(var=var.handle, m=slots['m'].handle, v=slots['v'].handle,
                  beta1_power=tf.pow(beta_1, local_step),
                  beta2_power=tf.pow(beta_2, local_step), lr=lr, beta1=beta_1,
                  beta2=beta_2, epsilon=eps, grad=grad)
      if s['amsgrad']:
        return raw.ResourceApplyAdamWithAmsgrad(vhat=slots['vhat'].handle, **args)
      return raw.ResourceApplyAdam(**args)
    # RMSprop
    rho, rms = hypers['rho'], slots['rms']
    if 'momentum' in slots:
      args = dict(var=var.handle, ms=rms.handle, mom=slots['momentum'].handle, lr=lr,
                  rho=rho, momentum=hypers['momentum'], epsilon=eps)
      args.update(dict(grad=values, indices=indices) if sparse else dict(grad=grad))
      if 'mg' in slots:
        return (raw.ResourceSparseApplyCenteredRMSProp if sparse else
                raw.ResourceApplyCenteredRMSProp)(mg=slots['mg'].handle, **args)
      return (raw.ResourceSparseApplyRMSProp if sparse else raw.ResourceApplyRMSProp)(
          **args)
    rms_t = tf.compat.v1.assign(rms, rho * rms + (1. - rho) * tf.square(grad))
    denominator = rms_t
    if 'mg' in slots:
      mg_t = tf.compat.v1.assign(slots['mg'], rho * slots['mg'] + (1. - rho) * grad)
      denominator = rms_t - tf.square(mg_t)
    return tf.compat.v1.assign_sub(var, lr * grad / (tf.sqrt(denominator) + eps)).op


def _deduplicate(grad):
  """IndexedSlices values summed per index, as Keras 2 applied sparse updates."""
  unique, positions = tf.unique(grad.indices)
  values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique)[0])
  return values, unique


def minimize(optimizer, loss, variables, global_step=None):
  """The train op of `optimizer` (from `get_optimizer`) on `variables`,
  counting the step in `global_step` when given (TF 2.15 called it in a
  `training` name scope).

  A `tf.compat.v1.train.Optimizer` runs its own `minimize`.
  """
  if isinstance(optimizer, tf.compat.v1.train.Optimizer):
    return optimizer.minimize(loss, global_step=global_step, var_list=variables)
  return optimizer.get_updates(loss, variables, global_step)
