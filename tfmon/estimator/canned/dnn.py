"""DNNClassifier, DNNRegressor, DNNEstimator: TF 2.15's feed-forward premade
estimators.

The graph is TF 2.15's (`canned/dnn.py`, `_DNNModelV2`): the feature columns'
input layer (`dnn/input_from_feature_columns/input_layer/...`), then per hidden
layer a dense layer `dnn/hiddenlayer_<i>/{kernel,bias}` (Glorot-uniform
kernel), dropout in training, optional batch normalization
(`dnn/hiddenlayer_<i>/batchnorm_<i>/...`, momentum 0.999), and the logits layer
`dnn/logits/{kernel,bias}`; each layer's zero fraction and activation
histogram are summarized. Default optimizer: Adagrad at Keras' default rate
0.001, as TF 2.15's v2 estimators ran it.
"""

import contextlib

import tensorflow as tf

from tfmon.estimator.canned import head as head_lib
from tfmon.estimator.canned import model_fn_utils as utils
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import ModeKeys


def _layer_summary(value, tag):
  tf.compat.v1.summary.scalar(f'{tag}/fraction_of_zero_values',
                              tf.math.zero_fraction(value))
  tf.compat.v1.summary.histogram(f'{tag}/activation', value)


def _dense(inputs, units, activation):
  kernel = tf.compat.v1.get_variable(
      'kernel', [inputs.shape[-1], units], tf.float32,
      tf.compat.v1.glorot_uniform_initializer())
  bias = tf.compat.v1.get_variable('bias', [units], tf.float32,
                                   tf.compat.v1.zeros_initializer())
  outputs = tf.nn.bias_add(tf.matmul(inputs, kernel), bias)
  return activation(outputs) if activation is not None else outputs


def _batch_norm(inputs, training, momentum=0.999, epsilon=1e-3):
  """Keras 2's BatchNormalization on a batch of vectors: `(outputs, updates)`."""
  size = inputs.shape[-1]
  def variable(name, initializer, trainable=True):
    made = tf.compat.v1.get_variable(name, [size], tf.float32, initializer,
                                     trainable=trainable)
    # Under tf.compat.v1.estimator's partitioner, a PartitionedVariable of one
    # part, which is updated as itself.
    return made if isinstance(made, tf.Variable) else list(made)[0]
  gamma = variable('gamma', tf.compat.v1.ones_initializer())
  beta = variable('beta', tf.compat.v1.zeros_initializer())
  moving_mean = variable('moving_mean', tf.compat.v1.zeros_initializer(), False)
  moving_variance = variable('moving_variance', tf.compat.v1.ones_initializer(), False)
  if not training:
    return tf.nn.batch_normalization(inputs, moving_mean, moving_variance, beta, gamma,
                                     epsilon), []
  mean, variance = tf.nn.moments(inputs, [0])
  updates = [tf.compat.v1.assign_sub(moving, (moving - value) * (1. - momentum))
             for moving, value in ((moving_mean, mean), (moving_variance, variance))]
  return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, epsilon), updates


def dnn_logits(features, mode, units, hidden_units, feature_columns, activation_fn,
               dropout, batch_norm, scope='dnn', input_layer_partitioner=None):
  """TF 2.15's DNN in the current graph: `(logits, trainable_variables, update_ops)`.

  Built in variable scope `scope` (None: the current one, which
  tf.compat.v1.estimator's DNN entered with a partitioner itself), the input
  layer partitioned by `input_layer_partitioner` if given.
  """
  training = mode == ModeKeys.TRAIN
  update_ops = []
  with utils.new_variables() as variables, (
      tf.compat.v1.variable_scope(scope) if scope else contextlib.nullcontext()):
    with tf.compat.v1.variable_scope('input_from_feature_columns',
                                     partitioner=input_layer_partitioner):
      net = tf.compat.v1.feature_column.input_layer(features, list(feature_columns))
    for i, size in enumerate(hidden_units):
      with tf.compat.v1.variable_scope(f'hiddenlayer_{i}'):
        net = _dense(net, size, activation_fn)
        if dropout is not None and training:
          net = tf.nn.dropout(net, rate=dropout)
        if batch_norm:
          with tf.compat.v1.variable_scope(f'batchnorm_{i}'):
            net, updates = _batch_norm(net, training)
            update_ops += updates
      _layer_summary(net, f'hiddenlayer_{i}')
    with tf.compat.v1.variable_scope('logits'):
      logits = _dense(net, units, None)
    _layer_summary(logits, 'logits')
  return logits, variables, update_ops


def _dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns,
                  make_optimizer, activation_fn, dropout, batch_norm):
  utils.check_features(features)
  logits, variables, update_ops = dnn_logits(
      features, mode, head.logits_dimension, hidden_units, feature_columns,
      activation_fn, dropout, batch_norm)
  return head.create_estimator_spec(
      features=features, mode=mode, labels=labels, logits=logits,
      optimizer=make_optimizer() if mode == ModeKeys.TRAIN else None,
      trainable_variables=variables, update_ops=update_ops)


class DNNEstimator(Estimator):
  """A feed-forward network on feature columns with any head:
  `tf.estimator.DNNEstimator` of TF 2.15.

  Args:
    head: A head (`tfmon.estimator.canned.BinaryClassHead`, ...).
    hidden_units: Sizes of the hidden layers, such as `[64, 32]`.
    feature_columns: `tf.feature_column` columns of the model's input.
    model_dir: Where checkpoints go (a TF 2.15 model_dir continues here).
    optimizer: 'Adagrad' (default, rate 0.001), 'Adam', 'Ftrl', 'RMSProp',
      'SGD', a tf.keras optimizer instance, or a callable returning one.
    activation_fn: The hidden layers' activation (default `tf.nn.relu`).
    dropout: The probability of dropping a hidden unit in training, or None.
    config: A `tfmon.estimator.RunConfig`.
    warm_start_from: As for `Estimator`.
    batch_norm: Batch-normalize each hidden layer.

  Raises:
    ValueError: a bad head, hidden_units, feature column, optimizer, dropout or
      activation, named with the fix.
  """

  def __init__(self, head, hidden_units, feature_columns, model_dir=None,
               optimizer='Adagrad', activation_fn=tf.nn.relu, dropout=None, config=None,
               warm_start_from=None, batch_norm=False):
    self._build(utils.check_estimator_head(head), hidden_units, feature_columns,
                model_dir, optimizer, activation_fn, dropout, config, warm_start_from,
                batch_norm)

  def _build(self, head, hidden_units, feature_columns, model_dir, optimizer,
             activation_fn, dropout, config, warm_start_from, batch_norm):
    hidden_units = utils.check_hidden_units(hidden_units)
    feature_columns = utils.check_feature_columns(feature_columns)
    make_optimizer = utils.optimizer_factory(optimizer, None)
    activation_fn = utils.check_activation(activation_fn)
    dropout = utils.check_dropout(dropout)

    def model_fn(features, labels, mode):
      return _dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns,
                           make_optimizer, activation_fn, dropout, batch_norm)

    super().__init__(model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNClassifier(DNNEstimator):
  """A feed-forward classifier: `tf.estimator.DNNClassifier` of TF 2.15.

  Args:
    hidden_units, feature_columns, model_dir, optimizer, activation_fn, dropout,
      config, warm_start_from, batch_norm: As for `DNNEstimator`.
    n_classes: The number of classes (>= 2; 2 is binary classification).
    weight_column: A feature name or numeric column of example weights.
    label_vocabulary: The class names, when labels are strings.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
               weight_column=None, label_vocabulary=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, config=None,
               warm_start_from=None, loss_reduction='sum_over_batch_size',
               batch_norm=False):
    head = head_lib.binary_or_multi_class_head(n_classes, weight_column,
                                               label_vocabulary, loss_reduction)
    self._build(head, hidden_units, feature_columns, model_dir, optimizer,
                activation_fn, dropout, config, warm_start_from, batch_norm)


class DNNRegressor(DNNEstimator):
  """A feed-forward regressor: `tf.estimator.DNNRegressor` of TF 2.15.

  Args:
    hidden_units, feature_columns, model_dir, optimizer, activation_fn, dropout,
      config, warm_start_from, batch_norm: As for `DNNEstimator`.
    label_dimension: Values per example.
    weight_column: A feature name or numeric column of example weights.
    loss_reduction: 'sum_over_batch_size' (default), 'sum' or 'auto'.
  """

  def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Adagrad', activation_fn=tf.nn.relu,
               dropout=None, config=None, warm_start_from=None,
               loss_reduction='sum_over_batch_size', batch_norm=False):
    head = head_lib.RegressionHead(label_dimension=label_dimension,
                                   weight_column=weight_column,
                                   loss_reduction=loss_reduction)
    self._build(head, hidden_units, feature_columns, model_dir, optimizer,
                activation_fn, dropout, config, warm_start_from, batch_norm)
