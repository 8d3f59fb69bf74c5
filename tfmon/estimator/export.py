"""tfmon.estimator.export: serving receivers, export outputs, and the SavedModel
`Estimator.export_saved_model` writes.

What an export is (TF1's, written as a TF2 SavedModel that `tf.saved_model.load`
reads):
  - the serving graph: in a fresh `tfmon.Graph`, `serving_input_receiver_fn`
    makes its receiver tensors (placeholders) and the features, and `model_fn`
    builds its PREDICT spec from the features, as TF1's Estimator did;
  - its variables: the graph's global variables, given the values of the
    checkpoint (the latest in model_dir, or `checkpoint_path`) by TF1 name, and
    the lookup tables the graph code made (TF2 recreates them at load);
  - its signatures: one per entry of the spec's `export_outputs` (default: a
    PredictOutput of `predictions`, as `serving_default`), and one per receiver
    alternative and entry ('<alternative>:<key>'); each is a function pruned
    from the graph, from the receiver tensors to the output's tensors, whose
    inputs and outputs are keyed as TF1's SignatureDefs keyed them. Signatures
    TF1 excluded (a classification over more than one input, an output needing
    a placeholder that is not an input) are excluded, with TF1's log lines;
  - its directory: `export_dir_base/<unix seconds>`, written as
    `temp-<seconds>` beside it and renamed, so that a half-written export never
    appears under a version number.
"""

import collections
import concurrent.futures
import os
import time

from absl import logging as absl_logging
from google.protobuf import text_format
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tfmon import paths
from tfmon import tf_internals
from tfmon import tf_logging as logging
from tfmon.compiled import graph_capture
from tfmon.estimator import warm_start
from tfmon.estimator.spec import ModeKeys

__all__ = ['ClassificationOutput', 'EvalOutput', 'ExportOutput', 'PredictOutput', 'RegressionOutput',
           'ServingInputReceiver', 'TensorServingInputReceiver',
           'build_parsing_serving_input_receiver_fn',
           'build_raw_serving_input_receiver_fn']

# TF1's default keys for a single tensor given where a dict is due.
_SINGLE_FEATURE_KEY = 'feature'
_SINGLE_RECEIVER_KEY = 'input'

_TENSOR_TYPES = (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)


# ---- receivers ----


def _check_tensors(tensors, label, single_key, allow_int_keys=False):
  """`tensors` (a tensor, or a dict of them) as a dict, checked as TF1 checked it.

  Raises:
    ValueError: None, a key that is not a string (or int, if allowed), or a
      value that is not a Tensor, SparseTensor or RaggedTensor.
  """
  if tensors is None:
    raise ValueError(f'{label} must be defined: give a tensor, or a dict of '
                     'them, made in serving_input_receiver_fn.')
  if not isinstance(tensors, dict):
    tensors = {single_key: tensors}
  key_types = (str, int) if allow_int_keys else (str,)
  for key, value in tensors.items():
    if not isinstance(key, key_types) or isinstance(key, bool):
      raise ValueError(
          f'{label} keys must be strings{" or ints" if allow_int_keys else ""}: '
          f'{key!r} is a {type(key).__name__}.')
    if not isinstance(value, _TENSOR_TYPES):
      raise ValueError(
          f'{label}[{key!r}] must be a Tensor, SparseTensor, or RaggedTensor; got '
          f'{value!r} of type {type(value).__name__}. Make it in '
          'serving_input_receiver_fn from the receiver tensors '
          '(tf.compat.v1.placeholder).')
  return tensors


class ServingInputReceiver(collections.namedtuple(
    'ServingInputReceiver',
    ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """What a `serving_input_receiver_fn` returns: the model's features, and the
  tensors a serving request feeds.

  Args:
    features: A tensor or a dict of string (or int) to tensors: what `model_fn`
      gets as `features`. A single tensor is passed as `{'feature': tensor}`
      (use `TensorServingInputReceiver` to pass it as is).
    receiver_tensors: A tensor or a dict of string to tensors: the signature's
      inputs, typically one `tf.string` placeholder of serialized tf.Examples.
      A single tensor is keyed 'input'.
    receiver_tensors_alternatives: A dict of name to more receiver tensors (a
      tensor or a dict): each makes signatures '<name>:<key>' fed there, such as
      features downstream of `tf.io.parse_example`.

  Raises:
    ValueError: a missing value, a key that is not a string, or a value that is
      not a tensor, named.
  """

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    features = _check_tensors(features, 'features', _SINGLE_FEATURE_KEY,
                              allow_int_keys=True)
    receiver_tensors = _check_tensors(receiver_tensors, 'receiver_tensors',
                                      _SINGLE_RECEIVER_KEY)
    if receiver_tensors_alternatives is not None:
      if not isinstance(receiver_tensors_alternatives, dict):
        raise ValueError(
            'receiver_tensors_alternatives must be a dict of name to receiver '
            f'tensors; got {receiver_tensors_alternatives!r}.')
      receiver_tensors_alternatives = {
          name: _check_tensors(alternative, f'receiver_tensors_alternatives[{name!r}]',
                               _SINGLE_RECEIVER_KEY)
          for name, alternative in receiver_tensors_alternatives.items()}
    return super().__new__(cls, features, receiver_tensors,
                           receiver_tensors_alternatives)


class TensorServingInputReceiver(collections.namedtuple(
    'TensorServingInputReceiver',
    ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """A ServingInputReceiver whose single feature tensor reaches `model_fn` as
  is, not as `{'feature': tensor}`.

  Raises:
    ValueError: as ServingInputReceiver, and for `features` that is not one
      tensor.
  """

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    if features is None:
      raise ValueError('features must be defined: give the one tensor model_fn '
                       'takes as its features.')
    if not isinstance(features, _TENSOR_TYPES):
      raise ValueError(
          f'TensorServingInputReceiver features must be one Tensor, SparseTensor or '
          f'RaggedTensor; got {features!r} of type {type(features).__name__}. For '
          'a dict of features use ServingInputReceiver.')
    receiver = ServingInputReceiver(features, receiver_tensors,
                                    receiver_tensors_alternatives)
    return super().__new__(cls, features, receiver.receiver_tensors,
                           receiver.receiver_tensors_alternatives)


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
  """A `serving_input_receiver_fn` fed serialized tf.Examples.

  The receiver is one `tf.string` placeholder of shape `[default_batch_size]`,
  'examples', parsed with `tf.io.parse_example(feature_spec)` into the features.

  Args:
    feature_spec: A dict of feature name to `tf.io.FixedLenFeature`,
      `VarLenFeature` (or other parsing spec), as `parse_example` takes.
    default_batch_size: Examples per request; None (recommended) for any number.

  Raises:
    TypeError: a `feature_spec` that is not a dict of string keys.
  """
  if not isinstance(feature_spec, dict) or not all(
      isinstance(key, str) for key in feature_spec):
    raise TypeError(
        f'feature_spec={feature_spec!r} must be a dict of feature name to a parsing '
        "spec, such as {'x': tf.io.FixedLenFeature([4], tf.float32)}.")

  def serving_input_receiver_fn():
    """Parses the serialized tf.Examples fed to 'examples'."""
    serialized = tf.compat.v1.placeholder(tf.string, shape=[default_batch_size],
                                          name='input_example_tensor')
    features = tf.io.parse_example(serialized, feature_spec)
    return ServingInputReceiver(features, {'examples': serialized})

  return serving_input_receiver_fn


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
  """A `serving_input_receiver_fn` fed the features themselves.

  Args:
    features: A dict of feature name to an example batch (a tensor, numpy
      array, or `tf.TensorSpec`): each feature's placeholder has its dtype and
      its shape after the batch dimension.
    default_batch_size: Examples per request; None (recommended) for any number.

  Raises:
    TypeError: `features` that is not a dict of name to tensor-like values.
  """
  if not isinstance(features, dict) or not features:
    raise TypeError(
        f'features={features!r} must be a dict of feature name to an example '
        "batch (a tensor or tf.TensorSpec), such as {'x': tf.zeros([1, 4])}.")
  specs = {}
  for name, example in features.items():
    if not isinstance(name, str):
      raise TypeError(f'features keys must be strings: {name!r} is a '
                      f'{type(name).__name__}.')
    if not isinstance(example, tf.TensorSpec):
      try:
        example = tf.TensorSpec.from_tensor(tf.convert_to_tensor(example))
      except (TypeError, ValueError) as e:
        raise TypeError(f'features[{name!r}]={example!r} is not a tensor nor a '
                        f'tf.TensorSpec: {e}') from None
    if example.shape.rank is None or example.shape.rank < 1:
      raise TypeError(f'features[{name!r}] has shape {example.shape}: give a '
                      'batch, whose first dimension is the batch size.')
    specs[name] = tf.TensorSpec([default_batch_size] + example.shape[1:].as_list(),
                                example.dtype)

  def serving_input_receiver_fn():
    """Feeds each feature's placeholder."""
    placeholders = {
        name: tf.compat.v1.placeholder(spec.dtype, spec.shape, name=_op_name(name))
        for name, spec in specs.items()}
    return ServingInputReceiver(placeholders, placeholders)

  return serving_input_receiver_fn


def _op_name(key):
  """A placeholder's name for feature `key` (None if TF would refuse it)."""
  name = ''.join(c if c.isalnum() or c in '_.-/' else '_' for c in key)
  return name if name[:1].isalnum() else None


# ---- export outputs ----


class ExportOutput:
  """What a signature outputs: the base of PredictOutput, ClassificationOutput
  and RegressionOutput."""

  method = None  # TF1's method name in the export's log lines

  def signature_outputs(self):
    """The signature's outputs: a dict of key to tensor."""
    raise NotImplementedError

  def signature_inputs(self, receiver_tensors):
    """The signature's inputs, keyed as TF1's SignatureDef keyed them.

    Raises:
      ValueError: receiver tensors this kind of signature cannot take (TF1 then
        excluded the signature from the export).
    """
    return dict(receiver_tensors)

  def as_signature_def(self, receiver_tensors):
    """The TF1 SignatureDef of this output fed by `receiver_tensors` (graph
    tensors), as TF's ExportOutput built it.

    Raises:
      ValueError: receiver tensors this kind of signature cannot take.
    """
    info = tf.compat.v1.saved_model.utils.build_tensor_info
    if not isinstance(receiver_tensors, dict):
      receiver_tensors = {_SINGLE_RECEIVER_KEY: receiver_tensors}
    return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
        {k: info(v) for k, v in self.signature_inputs(receiver_tensors).items()},
        {k: info(v) for k, v in self.signature_outputs().items()},
        _METHOD_NAMES[self.method])


_METHOD_NAMES = {'Predict': 'tensorflow/serving/predict',
                 'Classify': 'tensorflow/serving/classify',
                 'Regress': 'tensorflow/serving/regress',
                 'Eval': 'tensorflow/supervised/eval',
                 'Train': 'tensorflow/supervised/training'}


def _check_output_key(key, label):
  if isinstance(key, tuple):  # a multi-head model's (head, key)
    key = '/'.join(key)
  if not isinstance(key, str):
    raise ValueError(f'{label} output key must be a string; got {key!r}.')
  return key


class PredictOutput(ExportOutput):
  """A generic prediction signature: any named tensors.

  Args:
    outputs: A tensor (keyed 'output') or a dict of string to tensors.

  Raises:
    ValueError: a key that is not a string, or a value that is not a Tensor.
  """

  method = 'Predict'

  def __init__(self, outputs):
    if not isinstance(outputs, dict):
      outputs = {'output': outputs}
    self._outputs = {}
    for key, value in outputs.items():
      key = _check_output_key(key, 'Prediction')
      if not isinstance(value, tf.Tensor):
        raise ValueError(f'Prediction output value must be a Tensor; got {value!r} '
                         f'for key {key!r}.')
      self._outputs[key] = value

  @property
  def outputs(self):
    return dict(self._outputs)

  def signature_outputs(self):
    return self.outputs


def _single_string_input(receiver_tensors, kind):
  """`{'inputs': the one tf.string receiver tensor}`, as TF1's classification
  and regression signatures took (TF Serving's Classify and Regress APIs)."""
  values = list(receiver_tensors.values())
  if len(values) != 1 or values[0].dtype != tf.string:
    raise ValueError(
        f'{kind} signatures can only accept a single tensor input of type tf.string. '
        'Please check to make sure that you have structured the '
        'serving_input_receiver_fn so that it creates a single string placeholder. '
        'If your model function expects multiple inputs, then use '
        f'`tf.io.parse_example()` to parse the string into multiple tensors.\n '
        f'Received: {receiver_tensors}')
  return {tf.saved_model.CLASSIFY_INPUTS: values[0]}


class ClassificationOutput(ExportOutput):
  """A classification signature: 'classes' and/or 'scores', from one input of
  serialized tf.Examples ('inputs').

  Args:
    scores: A float tensor of each class's score, or None if `classes` is given.
    classes: A string tensor of class labels, or None if `scores` is given.

  Raises:
    ValueError: neither given, or one of the wrong type.
  """

  method = 'Classify'

  def __init__(self, scores=None, classes=None):
    if scores is not None and not (isinstance(scores, tf.Tensor) and
                                   scores.dtype.is_floating):
      raise ValueError(f'Classification scores must be a float32 Tensor; got {scores!r}')
    if classes is not None and not (isinstance(classes, tf.Tensor) and
                                    classes.dtype == tf.string):
      raise ValueError(
          f'Classification classes must be a string Tensor; got {classes!r}. Map '
          'class ids to labels, e.g. tf.gather(tf.constant(labels), ids), or use '
          'tf.strings.as_string(ids).')
    if scores is None and classes is None:
      raise ValueError('Cannot create a ClassificationOutput with empty arguments. '
                       'At least one of `scores` and `classes` must be defined.')
    self._scores = scores
    self._classes = classes

  @property
  def scores(self):
    return self._scores

  @property
  def classes(self):
    return self._classes

  def signature_outputs(self):
    outputs = {}
    if self._classes is not None:
      outputs[tf.saved_model.CLASSIFY_OUTPUT_CLASSES] = self._classes
    if self._scores is not None:
      outputs[tf.saved_model.CLASSIFY_OUTPUT_SCORES] = self._scores
    return outputs

  def signature_inputs(self, receiver_tensors):
    return _single_string_input(receiver_tensors, 'Classification')


class RegressionOutput(ExportOutput):
  """A regression signature: 'outputs', from one input of serialized
  tf.Examples ('inputs').

  Args:
    value: A float tensor of the predicted values.

  Raises:
    ValueError: a value that is not a float Tensor.
  """

  method = 'Regress'

  def __init__(self, value):
    if not (isinstance(value, tf.Tensor) and value.dtype.is_floating):
      raise ValueError(f'Regression output value must be a float32 Tensor; got {value!r}')
    self._value = value

  @property
  def value(self):
    return self._value

  def signature_outputs(self):
    return {tf.saved_model.REGRESS_OUTPUTS: self._value}

  def signature_inputs(self, receiver_tensors):
    return _single_string_input(receiver_tensors, 'Regression')


class EvalOutput(ExportOutput):
  """An evaluation signature: the loss, predictions and metrics, keyed as TF's
  (`loss`, `predictions[/<key>]`, `metrics/<name>/value`,
  `metrics/<name>/update_op`).

  Args:
    loss: A tensor, or a dict of them.
    predictions: A tensor, or a dict of them.
    metrics: A dict of name to `(value, update_op)`, as `tf.compat.v1.metrics`
      return; an update that is an op is served as an empty tensor run after it.

  Raises:
    ValueError: a key that is not a string, a value that is not a tensor, or a
      metric that is not a pair.
  """

  method = 'Eval'
  LOSS_NAME = 'loss'
  PREDICTIONS_NAME = 'predictions'
  METRICS_NAME = 'metrics'
  METRIC_VALUE_SUFFIX = 'value'
  METRIC_UPDATE_SUFFIX = 'update_op'

  def __init__(self, loss=None, predictions=None, metrics=None):
    self._loss = self._tensors(loss, self.LOSS_NAME)
    self._predictions = self._tensors(predictions, self.PREDICTIONS_NAME)
    self._metrics = {}
    for name, pair in (metrics or {}).items():
      name = _check_output_key(name, 'Metric')
      if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        raise ValueError(f'metrics[{name!r}] must be a (value, update_op) pair, as '
                         f'tf.compat.v1.metrics return; got {pair!r}.')
      value, update = pair
      if isinstance(update, tf.Operation):
        with tf.control_dependencies([update]):
          update = tf.constant([], name='metric_op_wrapper')
      prefix = f'{self.METRICS_NAME}/{name}'
      self._metrics[f'{prefix}/{self.METRIC_VALUE_SUFFIX}'] = value
      self._metrics[f'{prefix}/{self.METRIC_UPDATE_SUFFIX}'] = update

  @staticmethod
  def _tensors(value, prefix):
    if value is None:
      return {}
    if not isinstance(value, dict):
      return {prefix: value}
    return {f'{prefix}/{_check_output_key(key, prefix)}': tensor
            for key, tensor in value.items()}

  @property
  def loss(self):
    return self._loss or None

  @property
  def predictions(self):
    return self._predictions or None

  @property
  def metrics(self):
    return self._metrics or None

  def signature_outputs(self):
    return dict(self._loss, **self._predictions, **self._metrics)


def _export_outputs(spec):
  """The spec's export outputs, or TF1's default: PredictOutput(predictions)
  as `serving_default`; a single output is also served as the default.

  Raises:
    TypeError: `export_outputs` that is not a dict of ExportOutputs.
    ValueError: several export outputs, none of them the default.
  """
  default = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
  outputs = spec.export_outputs
  if outputs is None:
    return {default: PredictOutput(spec.predictions)}
  if not isinstance(outputs, dict):
    raise TypeError(f'EstimatorSpec export_outputs must be a dict of signature name '
                    f'to an ExportOutput; got {outputs!r}.')
  for key, output in outputs.items():
    if not isinstance(output, ExportOutput):
      raise TypeError(
          f'export_outputs[{key!r}] is {output!r} of type {type(output).__name__}: '
          'values in export_outputs must be tfmon.estimator.export.PredictOutput, '
          'ClassificationOutput or RegressionOutput.')
  outputs = {_check_output_key(key, 'export_outputs') if key is not None else 'None':
             output for key, output in outputs.items()}
  if len(outputs) == 1:
    outputs.setdefault(default, next(iter(outputs.values())))
  elif default not in outputs:
    raise ValueError(
        f'Multiple export_outputs were provided ({sorted(outputs)}), but none of them '
        f'is the default: key one of them {default!r} '
        '(tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY).')
  return outputs


# ---- the SavedModel ----


# `method`: TF1's method name, for the export's log lines.
_Signature = collections.namedtuple('_Signature', ['method', 'inputs', 'outputs'])


def export_saved_model(estimator, export_dir_base, serving_input_receiver_fn,
                       assets_extra=None, as_text=False, checkpoint_path=None,
                       experimental_mode=ModeKeys.PREDICT):
  """`estimator`'s serving graph as a SavedModel; see the module doc and
  `Estimator.export_saved_model`.

  Returns:
    The export's directory, as bytes (TF1's type).
  """
  if not serving_input_receiver_fn:
    raise ValueError('An input_receiver_fn must be defined.')
  if not callable(serving_input_receiver_fn):
    raise TypeError(f'serving_input_receiver_fn={serving_input_receiver_fn!r} must be '
                    'a function taking no arguments and returning a '
                    'tfmon.estimator.export.ServingInputReceiver.')
  if experimental_mode != ModeKeys.PREDICT:
    raise ValueError(
        f'experimental_mode={experimental_mode!r}: tfmon exports the PREDICT graph '
        f'only (experimental_mode=ModeKeys.PREDICT, {ModeKeys.PREDICT!r}); a TRAIN '
        'or EVAL SavedModel was a TF1 graph for TF1 sessions. Train from model_dir.')
  _check_assets_extra(assets_extra)
  # Before the graph is built: a file in the way fails here, naming the argument.
  export_dir_base = paths.check_directory(export_dir_base, 'export_dir_base')
  checkpoint = checkpoint_path or estimator.latest_checkpoint()
  settings = estimator._warm_start_settings  # pylint: disable=protected-access
  if not checkpoint and settings:
    # As TF1: an Estimator not trained yet exports what it would warm-start from.
    checkpoint = warm_start.checkpoint_path(settings.ckpt_to_initialize_from)
  if not checkpoint:
    raise ValueError(f"Couldn't find trained model at {estimator.model_dir}: train "
                     'the Estimator first, or give checkpoint_path.')
  checkpoint = os.fsdecode(checkpoint)
  if not tf.io.gfile.exists(checkpoint + '.index'):
    raise ValueError(f'checkpoint_path={checkpoint!r} is not a checkpoint (no '
                     f'{checkpoint}.index): give a prefix such as '
                     "'model_dir/model.ckpt-1000'.")

  arguments = (estimator, export_dir_base, serving_input_receiver_fn, assets_extra,
               as_text, checkpoint)
  if tf.inside_function():
    # A function graph is the default here (train_and_evaluate exports from
    # inside the training session's), where tf.saved_model.save refuses to run.
    # The default graph is the thread's: another thread starts outside it.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
      return thread.submit(_export, *arguments).result()
  return _export(*arguments)


def _export(estimator, export_dir_base, serving_input_receiver_fn, assets_extra, as_text,
            checkpoint):
  """Builds, restores and writes the export; returns its directory as bytes."""
  graph, signatures, tables = _build_serving_graph(estimator, serving_input_receiver_fn)
  global_variables, local_variables = _graph_variables(graph)
  _restore_by_name(global_variables, checkpoint)  # local ones keep their initial values
  root = tf_internals.AutoTrackable()
  # `.variables`, as TF2 gives a TF1 SavedModel it loads.
  root.variables = global_variables + local_variables
  root.tables = tables
  functions = _signature_functions(graph, signatures)

  tf.io.gfile.makedirs(export_dir_base)
  export_dir = _timestamped_export_dir(export_dir_base)
  temp_dir = _temp_export_dir(export_dir)
  absl_level = absl_logging.get_absl_logger().level
  try:
    try:
      tf.saved_model.save(root, temp_dir, signatures=functions)
    finally:
      # TF quirk: saving an AutoTrackable sets absl's verbosity to FATAL, then
      # back to what `get_verbosity()` read, the effective level: an absl logger
      # left unset (a program outside absl.app) was left at WARNING, and the
      # program's absl INFO lines vanished after an export.
      absl_logging.get_absl_logger().setLevel(absl_level)
    if as_text:
      _rewrite_as_text(temp_dir)
    _copy_assets_extra(temp_dir, assets_extra)
    tf.io.gfile.rename(temp_dir, export_dir)
  finally:
    if tf.io.gfile.exists(temp_dir):
      tf.io.gfile.rmtree(temp_dir)
  logging.info('SavedModel written to: %s', os.path.join(
      export_dir, 'saved_model.pbtxt' if as_text else 'saved_model.pb'))
  return export_dir.encode()


def _build_serving_graph(estimator, serving_input_receiver_fn):
  """`(graph, {signature name: _Signature}, lookup tables)`: the PREDICT graph
  built on the receiver's features, and the signatures TF1 would export."""
  graph = graph_capture.Graph()
  tracker = tf_internals.ResourceTracker()
  # pylint: disable=protected-access  (the Estimator's own steps, as predict builds)
  with graph.as_default(), graph.device(estimator.config.device_fn), \
      tf_internals.resource_tracker_scope(tracker):
    estimator._seed()
    tf.compat.v1.train.get_or_create_global_step()
    receiver = serving_input_receiver_fn()
    if not isinstance(receiver, (ServingInputReceiver, TensorServingInputReceiver)):
      raise TypeError(
          f'serving_input_receiver_fn returned {receiver!r} of type '
          f'{type(receiver).__name__}: it must return a '
          'tfmon.estimator.export.ServingInputReceiver (or TensorServingInputReceiver), '
          'such as build_parsing_serving_input_receiver_fn(feature_spec)() returns.')
    receivers = {None: receiver.receiver_tensors}  # None: the default receiver
    receivers.update(receiver.receiver_tensors_alternatives or {})
    _check_in_graph(receivers, graph)
    spec = estimator._call_model_fn(receiver.features, None, ModeKeys.PREDICT)
    # pylint: enable=protected-access
    outputs = _export_outputs(spec)
  signatures, excluded = {}, {}
  for receiver_name, receiver_tensors in receivers.items():
    for key, output in outputs.items():
      name = key if receiver_name is None else f'{receiver_name}:{key}'
      try:
        signature = _Signature(output.method, output.signature_inputs(receiver_tensors),
                               output.signature_outputs())
        _check_servable(graph, signature)
      except ValueError as e:
        excluded[name] = str(e)
        continue
      signatures[name] = signature
  _log_signatures(signatures, excluded)
  graph.finalize()
  return graph, signatures, list(tracker.resources)


def _check_in_graph(receivers, graph):
  """Raises ValueError for receiver tensors made outside the serving graph
  (eagerly, or in another graph): a request could not feed them."""
  for name, tensors in receivers.items():
    label = ('receiver_tensors' if name is None else
             f'receiver_tensors_alternatives[{name!r}]')
    for key, value in tensors.items():
      if not isinstance(value, tf.Tensor) or getattr(value, 'graph', None) is not graph:
        raise ValueError(
            f'{label}[{key!r}]={value!r} is not a dense tensor of the serving graph: '
            'make the receiver tensors inside serving_input_receiver_fn, with '
            'tf.compat.v1.placeholder (a request feeds them).')


def _check_servable(graph, signature):
  """Raises ValueError (TF1's exclusion) if an output needs a placeholder
  that is not among the inputs: a request could not feed it."""
  fed = {id(t) for t in signature.inputs.values()}
  captured = graph.captured_placeholder_ids()
  seen, pending = set(), [t.op for t in signature.outputs.values() if id(t) not in fed]
  while pending:
    op = pending.pop()
    if id(op) in seen:
      continue
    seen.add(id(op))
    if op.type in ('Placeholder', 'PlaceholderV2') and id(op) not in captured:
      raise ValueError(
          f"The signature's input tensors {[t.name for t in signature.inputs.values()]} "
          f'are insufficient to compute its output keys {list(signature.outputs)} '
          f'because of the dependency on `{op.name}` which is not given as a '
          'signature input.')
    pending.extend(t.op for t in op.inputs if id(t) not in fed)
    pending.extend(op.control_inputs)


_METHODS = ('Classify', 'Regress', 'Predict', 'Train', 'Eval')


def _log_signatures(signatures, excluded):
  """TF1's report of the signatures exported and excluded."""
  for method in _METHODS:
    names = [name for name, signature in signatures.items() if signature.method == method]
    logging.info('Signatures INCLUDED in export for %s: %s', method, names or 'None')
  if excluded:
    logging.info('Signatures EXCLUDED from export because they cannot be be served '
                 'via TensorFlow Serving APIs:')
    for name, message in excluded.items():
      logging.info("'%s' : %s", name, message)
  if not signatures:
    logging.warning('Export includes no signatures!')
  elif tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signatures:
    logging.warning('Export includes no default signature!')


def _graph_variables(graph):
  """The serving graph's variables, each once: `(global ones, local ones)`."""
  global_variables = graph.global_variables()
  known = {id(v) for v in global_variables}
  local = [v for v in graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)
           if id(v) not in known]
  return global_variables, list({id(v): v for v in local}.values())


def _restore_by_name(variables, checkpoint):
  """Assigns `variables` their values in `checkpoint`, by TF1 name, as TF1's
  Saver restored the export's graph.

  Raises:
    ValueError: naming the variables the checkpoint lacks, or holds in another
      shape.
  """
  logging.info('Restoring parameters from %s', checkpoint)
  keys = warm_start.checkpoint_keys(checkpoint)
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  named = [(v, v.name.split(':')[0]) for v in variables]
  missing = sorted(name for _, name in named if name not in keys)
  if missing:
    raise ValueError(
        f'Could not load all requested variables from checkpoint {checkpoint}: it has '
        f'no {missing} (it holds {sorted(keys)}). Please make sure your model_fn '
        'does not expect variables (in mode infer) that were not saved in the '
        'checkpoint: the PREDICT graph must name its variables as the TRAIN graph did.')
  for variable, name in named:
    shape = shapes[keys[name]]
    if not variable.shape.is_compatible_with(shape):
      raise ValueError(f'Variable {name} has shape {variable.shape} in the serving '
                       f'graph but {shape} in checkpoint {checkpoint}.')
    variable.assign(reader.get_tensor(keys[name]))


def _signature_functions(graph, signatures):
  """Each signature as a concrete function of one dict, keyed as its inputs.

  The subgraph from the inputs to the outputs is pruned from the graph once for
  all signatures of the same inputs (a classifier's four share theirs), and
  each signature's function calls it for its outputs (the SavedModel keeps it
  once; TensorFlow drops the outputs a signature does not return). The
  function takes a dict (rather than keyword arguments) because input keys
  need not be Python names ('sepal-length'): the SavedModel keys the
  signature's inputs by the specs' names.
  """
  groups = {}  # the inputs, by key -> names of the signatures taking them
  for name, signature in signatures.items():
    inputs = tuple(sorted((key, id(t)) for key, t in signature.inputs.items()))
    groups.setdefault(inputs, []).append(name)
  functions = {}
  for names in groups.values():
    first = signatures[names[0]]
    keys = list(first.inputs)
    fetches = list({id(t): t for name in names
                    for t in tf.nest.flatten(signatures[name].outputs)}.values())
    pruned = graph.wrapped_function().prune([first.inputs[key] for key in keys], fetches)
    index = {id(t): i for i, t in enumerate(fetches)}
    specs = {key: tf.TensorSpec(t.shape, t.dtype, name=key)
             for key, t in first.inputs.items()}
    for name in names:
      serve = _serve(pruned, keys, index, signatures[name].outputs)
      functions[name] = tf.function(serve, autograph=False).get_concrete_function(specs)
  return functions


def _serve(pruned, keys, index, outputs):
  """`serve(inputs)`: `outputs` of the inputs dict, by the shared `pruned`."""
  def serve(inputs):
    values = pruned(*[inputs[key] for key in keys])
    return tf.nest.map_structure(lambda t: values[index[id(t)]], outputs)
  return serve


# When the directory of this second exists, TF1 waited for the next one.
_DIRECTORY_ATTEMPTS = 10


def _timestamped_export_dir(export_dir_base):
  """`export_dir_base/<unix seconds>`, not existing yet (nor its temp dir)."""
  for attempt in range(1, _DIRECTORY_ATTEMPTS + 1):
    path = os.path.join(export_dir_base, str(int(time.time())))
    if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(_temp_export_dir(path))):
      return path
    time.sleep(1)
    logging.warning('Directory %s already exists; retrying (attempt %d/%d)', path,
                    attempt, _DIRECTORY_ATTEMPTS)
  raise RuntimeError('Failed to obtain a unique export directory name after '
                     f'{_DIRECTORY_ATTEMPTS} attempts.')


def _temp_export_dir(export_dir):
  """`temp-<seconds>` beside the export: TF Serving skips a name not a number."""
  head, tail = os.path.split(export_dir)
  return os.path.join(head, f'temp-{tail}')


def _rewrite_as_text(export_dir):
  """Replaces `saved_model.pb` with `saved_model.pbtxt` (TF1's `as_text`),
  which `tf.saved_model.load` reads as well."""
  binary = os.path.join(export_dir, 'saved_model.pb')
  proto = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(binary, 'rb') as f:
    proto.ParseFromString(f.read())
  with tf.io.gfile.GFile(os.path.join(export_dir, 'saved_model.pbtxt'), 'w') as f:
    f.write(text_format.MessageToString(proto))
  tf.io.gfile.remove(binary)


def _check_assets_extra(assets_extra):
  if assets_extra is None:
    return
  if not isinstance(assets_extra, dict) or not all(
      isinstance(k, str) and isinstance(v, (str, os.PathLike))
      for k, v in assets_extra.items()):
    raise TypeError(
        f'assets_extra={assets_extra!r} must be a dict of destination path (relative '
        "to assets.extra) to source file, such as {'vocab.txt': '/data/vocab.txt'}.")
  for destination, source in assets_extra.items():
    if not tf.io.gfile.exists(source):
      raise ValueError(f'assets_extra[{destination!r}]: source file {source} does not '
                       'exist.')


def _copy_assets_extra(export_dir, assets_extra):
  """Copies each `assets_extra` source to `assets.extra/<destination>`."""
  for destination, source in (assets_extra or {}).items():
    path = os.path.join(export_dir, 'assets.extra', destination)
    tf.io.gfile.makedirs(os.path.dirname(path))
    tf.io.gfile.copy(os.fspath(source), path, overwrite=True)
