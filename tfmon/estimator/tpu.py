"""tfmon.estimator.tpu: tf.compat.v1.estimator.tpu's TPUEstimator, off TPU.

`TPUEstimator(use_tpu=False, ...)` runs as TF <= 2.15 ran it on CPUs and GPUs
(BERT's `run_classifier.py` and many research programs trained so):
  - `input_fn` must take `params`; it gets a copy of them with
    `params['batch_size']`: `train_batch_size`, `eval_batch_size` or
    `predict_batch_size` for the mode (the global batch: nothing is sharded),
    and is called on the CPU;
  - `model_fn` must take `params`; it gets the same `batch_size` (none when
    exporting) and `params['use_tpu'] = False`, and may return a
    `TPUEstimatorSpec`, turned into an `EstimatorSpec` by `as_estimator_spec()`:
    `scaffold_fn()` makes the scaffold, `eval_metrics=(metric_fn, tensors)`
    calls `metric_fn` on the tensors for the metrics, and `host_call=(fn,
    tensors)`'s results are run every training and evaluation step by a hook;
  - the loss is not logged every N steps; global_step/sec and examples/sec are,
    every `ceil(log_step_count_steps / iterations_per_loop)` steps (or every
    `iterations_per_loop` seconds when it is `'<N>s'`, `'<N>m'`, `'<N>h'`);
  - `export_saved_model` writes the CPU SavedModel; the TPU graph that
    `export_to_tpu=True` (the default) added is not written, with a warning.
`use_tpu=True`, a TPU cluster resolver and TPU embeddings are refused at
construction, naming the fix.
"""

import collections
import copy
import enum
import inspect
import math
import re
import sys
import types

import tensorflow as tf

from tfmon import arg_checks
from tfmon import summaries
from tfmon import tf_logging as logging
from tfmon import train as tfmon_train
from tfmon.estimator import estimator as estimator_lib
from tfmon.estimator import run_config as run_config_lib
from tfmon.estimator.spec import EstimatorSpec, ModeKeys

__all__ = ['InputPipelineConfig', 'RunConfig', 'TPUConfig', 'TPUEstimator',
           'TPUEstimatorSpec', 'experimental']

_BATCH_SIZE_KEY = 'batch_size'
_USE_TPU_KEY = 'use_tpu'
_RESERVED_PARAMS_KEYS = (_BATCH_SIZE_KEY, 'context')

_NO_TPU = ('tfmon runs TPUEstimator off TPU only: pass use_tpu=False (the model '
           'trains on CPUs or GPUs as TF <= 2.15 ran it); to train on TPUs, port '
           'to tf.distribute.TPUStrategy with a step function and '
           'tfmon.train.MonitoredTrainingSession(strategy=...)')


class InputPipelineConfig:
  """How TPU infeed read the input, as TF named the choices (unused off TPU)."""
  PER_SHARD_V1 = 1
  PER_HOST_V1 = 2
  PER_HOST_V2 = 3
  BROADCAST = 4
  SLICED = 5


_ITERATIONS_PER_LOOP = re.compile(r'^(?P<value>[1-9]\d*)((?P<suffix>[s|m|h])$|$)')


def _parse_iterations_per_loop(iterations_per_loop):
  """`(value, unit)`: a count of steps, or seconds ('<N>s', '<N>m', '<N>h')."""
  match = _ITERATIONS_PER_LOOP.match(str(iterations_per_loop))
  if match is None:
    raise ValueError(
        f'Invalid TPUConfig `iterations_per_loop` value {iterations_per_loop!r}. Value '
        'must be positive integer value or time-based value `<N><s|m|h>` where <N> '
        'is any positive integer and `s`, `m`, `h` are unit of time in seconds, '
        'minutes, hours respectively. Examples of valid values: `3600s`, `60m`, `1h`.')
  value = int(match.group('value')) * {'m': 60, 'h': 3600}.get(match.group('suffix'), 1)
  return value, 'seconds' if match.group('suffix') else 'count'


class TPUConfig(collections.namedtuple('TPUConfig', [
    'iterations_per_loop', 'num_shards', 'num_cores_per_replica',
    'per_host_input_for_training', 'tpu_job_name', 'initial_infeed_sleep_secs',
    'input_partition_dims', 'eval_training_input_configuration',
    'experimental_host_call_every_n_steps',
    'experimental_allow_per_host_v2_parallel_get_next', 'experimental_feed_hook'])):
  """TF's TPU settings, with its defaults and checks. Off TPU only
  `iterations_per_loop` is read: it sets how often the step rate is logged.

  Raises:
    ValueError: the values TF's TPUConfig refused.
  """

  def __new__(cls, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
              per_host_input_for_training=True, tpu_job_name=None,
              initial_infeed_sleep_secs=None, input_partition_dims=None,
              eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
              experimental_host_call_every_n_steps=1,
              experimental_allow_per_host_v2_parallel_get_next=False,
              experimental_feed_hook=None):
    _parse_iterations_per_loop(iterations_per_loop)
    if num_shards is not None:
      _check_positive_integer(num_shards, 'TPUConfig num_shards')
    if num_cores_per_replica is not None and num_cores_per_replica not in (
        1, 2, 4, 8, 16, 32, 64, 128):
      raise ValueError('num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; '
                       f'got {num_cores_per_replica}')
    if eval_training_input_configuration not in (InputPipelineConfig.PER_HOST_V1,
                                                 InputPipelineConfig.SLICED):
      raise ValueError('eval_training_input_configuration must be PER_HOST_V1 or '
                       f'SLICED; got {eval_training_input_configuration}')
    if per_host_input_for_training is False:
      per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
    elif per_host_input_for_training is True:
      per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
    if initial_infeed_sleep_secs:
      _check_positive_integer(initial_infeed_sleep_secs,
                              'TPUConfig initial_infeed_sleep_secs')
    return super().__new__(
        cls, iterations_per_loop, num_shards, num_cores_per_replica,
        per_host_input_for_training, tpu_job_name, initial_infeed_sleep_secs,
        input_partition_dims, eval_training_input_configuration,
        experimental_host_call_every_n_steps,
        experimental_allow_per_host_v2_parallel_get_next, experimental_feed_hook)


def _check_positive_integer(value, name):
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
    raise ValueError(f'{name} must be a positive integer, got {value!r}')


class RunConfig(run_config_lib.RunConfig):
  """tf.estimator.tpu.RunConfig: RunConfig's settings and a `TPUConfig`.

  Args:
    tpu_config: A `TPUConfig` (default: TPUConfig()).
    evaluation_master: Kept (the sessions run in this process).
    master: Kept; the sessions warn that they ignore it.
    cluster: Must be None: a TPU cluster resolver needs TPUs.
    **kwargs: `tfmon.estimator.RunConfig`'s arguments.

  Raises:
    ValueError: a `cluster`, both `master` and `cluster`, or RunConfig's.
  """

  def __init__(self, tpu_config=None, evaluation_master=None, master=None,
               cluster=None, **kwargs):
    super().__init__(**kwargs)
    if cluster is not None:
      raise ValueError(f'cluster={cluster!r}: a TPU cluster resolver needs TPUs. '
                       f'{_NO_TPU}; pass cluster=None.')
    if tpu_config is not None and not isinstance(tpu_config, TPUConfig):
      raise ValueError(f'tpu_config={tpu_config!r} must be a '
                       'tfmon.estimator.tpu.TPUConfig.')
    self._tpu_config = tpu_config or TPUConfig()
    self._cluster = None
    if master is not None:
      self._master = master
    if evaluation_master is not None:
      self._evaluation_master = evaluation_master
    elif not self._evaluation_master and self.task_type != 'evaluator':
      self._evaluation_master = self._master

  tpu_config = property(lambda self: self._tpu_config)
  cluster = property(lambda self: self._cluster)

  def replace(self, **kwargs):
    tpu_config = kwargs.pop('tpu_config', self._tpu_config)
    new = super().replace(**kwargs)
    new._tpu_config = tpu_config  # pylint: disable=protected-access
    return new


class TPUEstimatorSpec(collections.namedtuple('TPUEstimatorSpec', [
    'mode', 'predictions', 'loss', 'train_op', 'eval_metrics', 'export_outputs',
    'scaffold_fn', 'host_call', 'training_hooks', 'evaluation_hooks',
    'prediction_hooks'])):
  """What a TPUEstimator `model_fn` returns; `as_estimator_spec()` is the
  `EstimatorSpec` it runs as off TPU.

  Args:
    mode, predictions, loss, train_op, export_outputs, training_hooks,
      evaluation_hooks, prediction_hooks: As EstimatorSpec's.
    eval_metrics: `(metric_fn, tensors)`: `metric_fn(*tensors)` (a list) or
      `metric_fn(**tensors)` (a dict) returns the `eval_metric_ops`.
    scaffold_fn: Called without arguments, returns the `Scaffold`.
    host_call: `(fn, tensors)`: what `fn(*tensors)` (or `**tensors`) returns is
      run every training and evaluation step.

  Raises:
    ValueError: `eval_metrics` or `host_call` not a pair of a function and a
      list, tuple or dict of tensors.
    TypeError: a function that is not callable, or hooks that are not
      SessionRunHooks.
  """

  def __new__(cls, mode, predictions=None, loss=None, train_op=None,
              eval_metrics=None, export_outputs=None, scaffold_fn=None,
              host_call=None, training_hooks=None, evaluation_hooks=None,
              prediction_hooks=None):
    for name, call in (('eval_metrics', eval_metrics), ('host_call', host_call)):
      if call is not None:
        _check_host_call(name, call)
    if scaffold_fn is not None and not callable(scaffold_fn):
      raise TypeError(f'scaffold_fn={scaffold_fn!r} must be a function returning a '
                      'Scaffold.')
    hooks = [tuple(arg_checks.check_list_of(
        value, tf.compat.v1.train.SessionRunHook, name, 'hook') or ())
             for name, value in (('training_hooks', training_hooks),
                                 ('evaluation_hooks', evaluation_hooks),
                                 ('prediction_hooks', prediction_hooks))]
    return super().__new__(cls, mode, predictions, loss, train_op, eval_metrics,
                           export_outputs, scaffold_fn, host_call, *hooks)

  def as_estimator_spec(self):
    """The equivalent `EstimatorSpec`, as TF's built it for CPU train and eval."""
    eval_metric_ops = None
    if self.eval_metrics is not None:
      eval_metric_ops = _call_host_fn('eval_metrics', self.eval_metrics)
    hooks = ()
    if self.host_call is not None:
      hooks = (_HostCallHook(_call_host_fn('host_call', self.host_call)),)
    return EstimatorSpec(
        mode=self.mode, predictions=self.predictions, loss=self.loss,
        train_op=self.train_op, eval_metric_ops=eval_metric_ops,
        export_outputs=self.export_outputs,
        scaffold=self.scaffold_fn() if self.scaffold_fn else None,
        training_hooks=self.training_hooks + hooks,
        evaluation_hooks=self.evaluation_hooks + hooks,
        prediction_hooks=self.prediction_hooks + hooks)


def _check_host_call(name, call):
  if not isinstance(call, (tuple, list)):
    raise ValueError(f'{name} should be tuple or list: (function, tensors); got '
                     f'{call!r}.')
  if len(call) != 2:
    raise ValueError(f'{name} should have two elements: (function, tensors); got '
                     f'{len(call)}.')
  if not callable(call[0]):
    raise TypeError(f'{name}[0] should be callable; got {call[0]!r}.')
  if not isinstance(call[1], (tuple, list, dict)):
    raise ValueError(f'{name}[1] should be tuple or list, or dict; got {call[1]!r}.')


def _call_host_fn(name, call):
  function, tensors = call
  if isinstance(tensors, dict):
    try:
      return function(**tensors)
    except TypeError as e:
      raise TypeError(f'{name}[0] does not take the keys of {name}[1] '
                      f'{sorted(tensors)} as arguments: {e}') from e
  return function(*tensors)


class _HostCallHook(tf.compat.v1.train.SessionRunHook):
  """Runs a host call's results every step (TF's `_OutfeedHostCallHook`)."""

  def __init__(self, fetches):
    self._fetches = fetches

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._fetches)


class ExamplesPerSecondHook(tfmon_train.StepCounterHook):
  """StepCounterHook that also logs and records examples/sec (TPUEstimator's).

  Args:
    batch_size: Examples per step (None: examples/sec is not reported).
    every_n_steps, every_n_secs, output_dir, summary_writer: StepCounterHook's.
  """

  def __init__(self, batch_size, every_n_steps=100, every_n_secs=None,
               output_dir=None, summary_writer=None):
    self._batch_size = batch_size
    super().__init__(every_n_steps=every_n_steps, every_n_secs=every_n_secs,
                     output_dir=output_dir, summary_writer=summary_writer)

  def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
    steps_per_sec = elapsed_steps / elapsed_time
    values = {'global_step/sec': steps_per_sec}
    if self._batch_size is not None:
      values['examples/sec'] = self._batch_size * steps_per_sec
    if self._summary_writer is not None:
      summaries.write_simple_values(self._summary_writer, values, global_step)
    for tag, value in values.items():
      logging.info('%s: %g', tag, value)


class ExportSavedModelApiVersion(enum.Enum):
  V1 = 1
  V2 = 2


class TPUEstimator(estimator_lib.Estimator):
  """tf.compat.v1.estimator.tpu.TPUEstimator, run with `use_tpu=False`.

  See the module doc for what runs and how; arguments as TF's.

  Args:
    model_fn: `model_fn(features, labels, mode, config, params)` (`params`
      required) returning an `EstimatorSpec` or a `TPUEstimatorSpec`.
    model_dir, warm_start_from: As Estimator's.
    config: A `tfmon.estimator.tpu.RunConfig` (required).
    params: A dict for `input_fn` and `model_fn`; 'batch_size' and 'context'
      are reserved.
    use_tpu: Must be False.
    train_batch_size, eval_batch_size, predict_batch_size: `params['batch_size']`
      in each mode (a positive int, or None: not set).
    batch_axis, eval_on_tpu: Read only on TPU.
    export_to_tpu: True (TF's default) logs at export that the TPU graph is
      not written.
    export_to_cpu: Must be True: the SavedModel exported is the CPU one.
    embedding_config_spec: Must be None (TPU embeddings need TPUs).
    export_saved_model_api_version: 1 or 2 (read only for TPU graphs).

  Raises:
    ValueError: `use_tpu=True`, a config that is not a tpu.RunConfig, reserved
      params keys, a batch size that is not a positive int, a model_fn without
      `params`, `export_to_cpu=False`, an embedding config, or a bad API version.
  """

  def __init__(self, model_fn=None, model_dir=None, config=None, params=None,
               use_tpu=True, train_batch_size=None, eval_batch_size=None,
               predict_batch_size=None, batch_axis=None, eval_on_tpu=True,
               export_to_tpu=True, export_to_cpu=True, warm_start_from=None,
               embedding_config_spec=None,
               export_saved_model_api_version=ExportSavedModelApiVersion.V1):
    del batch_axis, eval_on_tpu  # how TPU shards and evaluates
    if use_tpu:
      raise ValueError(f'TPUEstimator(use_tpu={use_tpu!r}): {_NO_TPU}.')
    if not isinstance(config, RunConfig):
      raise ValueError(f'config={config!r}: `config` must be provided with type '
                       '`tfmon.estimator.tpu.RunConfig` (tf.estimator.tpu.RunConfig).')
    if params is not None and any(k in params for k in _RESERVED_PARAMS_KEYS):
      raise ValueError(f'{list(_RESERVED_PARAMS_KEYS)} are reserved keys but existed '
                       f'in params {params}.')
    for name, value in (('train_batch_size', train_batch_size),
                        ('eval_batch_size', eval_batch_size),
                        ('predict_batch_size', predict_batch_size)):
      if value is not None:
        _check_positive_integer(value, name)
    if not export_to_cpu:
      raise ValueError('export_to_cpu=False: tfmon exports the CPU SavedModel only '
                       '(a TPU graph needs TPUs); pass export_to_cpu=True.')
    if embedding_config_spec is not None:
      raise ValueError(f'embedding_config_spec={embedding_config_spec!r}: TPU '
                       'embeddings need TPUs; use tf.feature_column embedding '
                       'columns (or Keras Embedding layers) in the model_fn.')
    if export_saved_model_api_version not in (ExportSavedModelApiVersion.V1,
                                              ExportSavedModelApiVersion.V2, 1, 2):
      raise ValueError('export_saved_model_api_version should be 1 or 2; got '
                       f'{export_saved_model_api_version}.')
    if not callable(model_fn):
      raise TypeError(f'model_fn={model_fn!r} is not callable.')
    arguments = inspect.signature(model_fn).parameters
    if 'params' not in arguments:
      raise ValueError(f"model_fn ({model_fn}) does not include params argument, "
                       "required by TPUEstimator to pass batch size as "
                       "params['batch_size']")
    self._user_model_fn = model_fn
    self._user_model_fn_args = set(arguments)
    self._batch_sizes = {ModeKeys.TRAIN: train_batch_size,
                         ModeKeys.EVAL: eval_batch_size,
                         ModeKeys.PREDICT: predict_batch_size}
    self._export_to_tpu = export_to_tpu
    self._is_input_fn_invoked = None
    # As TF's: Estimator logs no loss; ExamplesPerSecondHook counts steps, its
    # period in TPU loops of `iterations_per_loop` steps.
    value, unit = _parse_iterations_per_loop(config.tpu_config.iterations_per_loop)
    log_steps = config.log_step_count_steps
    if unit == 'seconds':
      self._log_every_n_steps, self._log_every_n_secs = None, value
    else:
      self._log_every_n_steps = (None if log_steps is None else
                                 int(math.ceil(log_steps / value)))
      self._log_every_n_secs = None
    super().__init__(_model_fn_of(self), model_dir=model_dir,
                     config=config.replace(log_step_count_steps=None),
                     params=params, warm_start_from=warm_start_from)

  def get_params(self, deep=True):
    params = super().get_params(deep)
    params['model_fn'] = self._user_model_fn
    return params

  def _input(self, input_fn, mode):
    """Calls `input_fn` as TF's TPUEstimator did off TPU: `params` required,
    with `params['batch_size']`, on the CPU."""
    if not callable(input_fn) or 'params' not in inspect.signature(input_fn).parameters:
      raise ValueError(f'input_fn ({input_fn}) does not include params argument, '
                       'required by TPUEstimator to pass batch size as '
                       'params["batch_size"]')
    params = copy.deepcopy(self._params)
    if self._batch_sizes[mode] is not None:
      params[_BATCH_SIZE_KEY] = self._batch_sizes[mode]
    self._is_input_fn_invoked = True
    with tf.compat.v1.device('/device:CPU:0'):
      return estimator_lib.call_input_fn(input_fn, mode, params, self._config)

  def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                         assets_extra=None, as_text=False, checkpoint_path=None,
                         experimental_mode=ModeKeys.PREDICT):
    """As Estimator's: the CPU SavedModel (`params['use_tpu']` False, no
    `params['batch_size']`)."""
    if self._export_to_tpu:
      logging.warning('TPUEstimator(export_to_tpu=True): the SavedModel holds the '
                      'CPU graph only (tag serve); the TPU graph (tags serve, tpu) '
                      'needs TPUs. Pass export_to_tpu=False to export the CPU graph '
                      'without this warning.')
    return super().export_saved_model(
        export_dir_base, serving_input_receiver_fn, assets_extra=assets_extra,
        as_text=as_text, checkpoint_path=checkpoint_path,
        experimental_mode=experimental_mode)

  def _call_user_model_fn(self, features, labels, mode, config, params):
    """The user's model_fn called as TF's TPUEstimator called it on CPU."""
    is_export_mode = not self._is_input_fn_invoked
    self._is_input_fn_invoked = None
    params = copy.deepcopy(params)
    if not is_export_mode and self._batch_sizes[mode] is not None:
      params[_BATCH_SIZE_KEY] = self._batch_sizes[mode]
    params[_USE_TPU_KEY] = False
    arguments = self._user_model_fn_args
    if 'labels' not in arguments and labels is not None:
      raise ValueError('model_fn does not take labels, but input_fn returns labels.')
    available = {'labels': labels, 'mode': mode, 'config': copy.deepcopy(config),
                 'params': params}
    logging.info('Running %s on CPU/GPU', mode)
    spec = self._user_model_fn(
        features=features, **{k: v for k, v in available.items() if k in arguments})
    if isinstance(spec, TPUEstimatorSpec):
      spec = spec.as_estimator_spec()
    if isinstance(spec, EstimatorSpec) and (
        self._log_every_n_steps is not None or self._log_every_n_secs is not None):
      hook = ExamplesPerSecondHook(
          self._batch_sizes[mode],
          every_n_steps=self._log_every_n_steps, every_n_secs=self._log_every_n_secs,
          output_dir=self.model_dir if config.save_summary_steps else None)
      spec = spec._replace(training_hooks=spec.training_hooks + (hook,))
    return spec


def _model_fn_of(estimator):
  """The Estimator model_fn of a TPUEstimator: its user's, called as TF's was."""

  def model_fn(features, labels, mode, config, params):
    return estimator._call_user_model_fn(  # pylint: disable=protected-access
        features, labels, mode, config, params)

  return model_fn


def _experimental_getattr(name):
  if name == 'EmbeddingConfigSpec':
    raise AttributeError(
        'tfmon.estimator.tpu.experimental has no EmbeddingConfigSpec: TPU embeddings '
        'need TPUs; use tf.feature_column embedding columns (or Keras Embedding '
        'layers) in the model_fn.')
  raise AttributeError(f"module 'tfmon.estimator.tpu.experimental' has no attribute "
                       f'{name!r}')


# tf.compat.v1.estimator.tpu.experimental held TPU embeddings only: refused.
experimental = types.ModuleType(f'{__name__}.experimental',
                                'tf.compat.v1.estimator.tpu.experimental: refused.')
experimental.__getattr__ = _experimental_getattr
sys.modules[experimental.__name__] = experimental
