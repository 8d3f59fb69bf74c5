"""What the premade estimators' model_fns share: argument checks that fail at
construction, the optimizer chosen per graph, and the variables a block made."""

import contextlib

import tensorflow as tf

from tfmon.estimator.canned import optimizers


def check_features(features):
  if not isinstance(features, dict):
    raise ValueError(f'features should be a dictionary of `Tensor`s, as input_fn '
                     f'returns them for feature columns. Given type: '
                     f'{type(features).__name__}')


def check_feature_columns(feature_columns, argument='feature_columns'):
  """The columns as a tuple, checked: a non-empty iterable of feature columns."""
  if feature_columns is None or isinstance(feature_columns, (str, dict)):
    raise ValueError(f'{argument}={feature_columns!r}: give a list of '
                     'tf.feature_column columns.')
  columns = tuple(feature_columns)
  if not columns:
    raise ValueError(f'{argument} is empty: give at least one tf.feature_column column.')
  for column in columns:
    if not hasattr(column, 'name') or not hasattr(column, 'parse_example_spec'):
      raise ValueError(f'{argument} holds {column!r}, which is not a feature column: '
                       'make it with tf.feature_column (numeric_column, ...).')
  return columns


def check_hidden_units(hidden_units, argument='hidden_units'):
  if hidden_units is None or isinstance(hidden_units, (str, int)):
    raise ValueError(f'{argument}={hidden_units!r}: give a list of layer sizes, '
                     'such as [64, 32].')
  units = tuple(hidden_units)
  if not units or not all(isinstance(u, int) and not isinstance(u, bool) and u > 0
                          for u in units):
    raise ValueError(f'{argument}={hidden_units!r}: give a non-empty list of positive '
                     'ints, such as [64, 32].')
  return units


def check_dropout(dropout):
  if dropout is not None and not 0 <= dropout < 1:
    raise ValueError(f'dropout={dropout!r} must be None or a rate in [0, 1).')
  return dropout


def check_activation(activation_fn):
  if not callable(activation_fn):
    raise ValueError(f'activation_fn={activation_fn!r} is not callable: give one such '
                     'as tf.nn.relu.')
  return activation_fn


def optimizer_factory(optimizer, learning_rate):
  """A function making the optimizer of one model_fn call.

  Names and Keras instances are resolved now, so a bad one fails at
  construction. A callable is called now too: one returning a Keras optimizer
  is resolved once (made inside a model_fn's graph, a Keras 3 optimizer's own
  variables would join the checkpoint); one returning a
  `tf.compat.v1.train.Optimizer` is called again in each graph, as TF called it.
  """
  if callable(optimizer) and not hasattr(optimizer, 'get_config') and not isinstance(
      optimizer, (optimizers.GraphOptimizer, tf.compat.v1.train.Optimizer)):
    made = optimizer()
    if isinstance(made, tf.compat.v1.train.Optimizer):
      return lambda: optimizers.get_optimizer(optimizer(), learning_rate)
    optimizer = made
  resolved = optimizers.get_optimizer(optimizer, learning_rate)
  return lambda: resolved


@contextlib.contextmanager
def new_variables(collection=tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES):
  """Yields a list that, after the block, holds the variables it added to
  `collection`."""
  before = {id(v) for v in tf.compat.v1.get_collection(collection)}
  made = []
  yield made
  made.extend(v for v in tf.compat.v1.get_collection(collection)
              if id(v) not in before)


def check_estimator_head(head):
  from tfmon.estimator.canned import head as head_lib  # pylint: disable=g-import-not-at-top
  if not isinstance(head, head_lib.Head):
    raise ValueError(f'head={head!r} is not a head: give one of '
                     'tfmon.estimator.canned\'s heads (BinaryClassHead, ...).')
  return head
