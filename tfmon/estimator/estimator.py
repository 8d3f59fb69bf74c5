"""Estimator: a TF1 `model_fn` trained, evaluated and used for prediction.

Each call builds the `model_fn`'s graph for its mode in a fresh `tfmon.Graph`
(graph mode, SPEC section 8) and runs it with a tfmon session, as TF1's
Estimator built a fresh `tf.Graph` and ran a MonitoredSession:
  - `train` restores the latest checkpoint in `model_dir` (a second `train`
    resumes), runs the spec's `train_op` with Estimator's hooks in Estimator's
    order, and writes `model.ckpt-N`, the `checkpoint` state file and event files
    at the top of `model_dir`;
  - `evaluate` restores a checkpoint into the EVAL graph (fresh metric
    variables), runs the metrics' update ops until `steps` or the data runs
    out, reads their values, logs "Saving dict for global step N: ..." and
    writes them as `simple_value` scalars into `model_dir/eval` (or
    `eval_<name>`), where the early-stopping hooks read them;
  - `predict` restores a checkpoint into the PREDICT graph and yields
    predictions until the data runs out.
Variables are shared between the modes by name, as TF1's checkpoints shared them.
"""

import contextlib
import inspect
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from tfmon import checkpointing
from tfmon import paths
from tfmon import summaries
from tfmon import tf_internals
from tfmon import train as tfmon_train
from tfmon import workers
from tfmon import tf_logging as logging
from tfmon.compiled import graph_capture
from tfmon.compiled import meta_graph
from tfmon.estimator import export as export_lib
from tfmon.estimator import replicated
from tfmon.estimator import run_config as run_config_lib
from tfmon.estimator import warm_start
from tfmon.estimator.spec import EstimatorSpec, ModeKeys, RunConfig

_MODEL_FN_ARGS = ('features', 'labels', 'mode', 'params', 'config')
_INPUT_FN_ARGS = ('mode', 'params', 'config')


class Estimator:
  """tf.estimator.Estimator for TF 2.16+, on tfmon's graph capture.

  Args:
    model_fn: `model_fn(features, labels, mode, params, config)` returning an
      `EstimatorSpec`; it may take any subset of those arguments, as TF1 allowed.
    model_dir: Where checkpoints and event files go (default: a new temporary
      directory, logged; or `config.model_dir`).
    config: A `RunConfig`.
    params: A dict handed to `model_fn` as `params`.
    warm_start_from: A checkpoint, a directory holding one, a SavedModel
      directory, or a `WarmStartSettings`: `train` starts the model's
      trainable variables from it (the settings' variables) when `model_dir`
      holds no checkpoint yet, as TF1 did.

  Raises:
    TypeError: a `model_fn` that is not callable or takes other arguments, or a
      `config` that is not a RunConfig.
    ValueError: `model_dir` and `config.model_dir` that differ, a
      `warm_start_from` that is neither a path nor WarmStartSettings, or a
      TF_CONFIG naming a cluster of more than one training task.
  """

  def __init__(self, model_fn, model_dir=None, config=None, params=None,
               warm_start_from=None):
    if not callable(model_fn):
      raise TypeError(f'model_fn={model_fn!r} is not callable.')
    arguments = set(inspect.signature(model_fn).parameters)
    unknown = sorted(arguments - set(_MODEL_FN_ARGS) - {'self'})
    if unknown:
      raise TypeError(f'model_fn has arguments {unknown}, which Estimator does not '
                      f'pass: it takes any of {list(_MODEL_FN_ARGS)}.')
    if config is None:
      config = RunConfig()
    if not isinstance(config, RunConfig):
      raise TypeError(f'config={config!r} must be a tfmon.estimator.RunConfig.')
    _check_cluster(config)
    self._warm_start_settings = warm_start.settings_from(warm_start_from)
    model_dir = paths.check_directory(model_dir, 'model_dir')
    config_dir = paths.check_directory(config.model_dir, 'config.model_dir')
    if model_dir and config_dir and model_dir != config_dir:
      raise ValueError(f'model_dir={model_dir!r} and config.model_dir='
                       f'{config.model_dir!r} differ: give one.')
    model_dir = model_dir or config_dir
    if not model_dir:
      model_dir = tempfile.mkdtemp()
      logging.warning('Using temporary folder as model directory: %s', model_dir)
    self._model_dir = model_dir
    self._config = config.replace(model_dir=self._model_dir)
    logging.info('Using config: %s', str(vars(self._config)))
    self._model_fn = model_fn
    self._model_fn_args = arguments
    self._params = dict(params or {})
    self._warm_start_from = warm_start_from

  @property
  def model_dir(self):
    return self._model_dir

  @property
  def config(self):
    return self._config

  @property
  def params(self):
    return dict(self._params)

  @property
  def model_fn(self):
    """The `model_fn`, bound to `params`: `model_fn(features, labels, mode,
    config)`, as TF's Estimator returned it."""

    def public_model_fn(features, labels, mode, config):
      return self._call_model_fn(features, labels, mode, config)

    return public_model_fn

  def get_params(self, deep=True):
    """The constructor's arguments, by name (scikit-learn's protocol, which
    TF 1.x's contrib.learn estimators followed)."""
    del deep  # no argument is itself an estimator
    return {'model_fn': self._model_fn, 'model_dir': self._model_dir,
            'config': self._config, 'params': self.params,
            'warm_start_from': self._warm_start_from}

  # ---- training ----

  def train(self, input_fn, hooks=None, steps=None, max_steps=None,
            saving_listeners=None):
    """Trains the model, resuming from the latest checkpoint in `model_dir`.

    Args:
      input_fn: Returns a `tf.data.Dataset` of `(features, labels)` (or of
        features), or a `(features, labels)` pair of tensors.
      hooks: `SessionRunHook`s, run after the input's and before Estimator's
        and the spec's `training_hooks` (TF1's order).
      steps: Train this many more steps (not with `max_steps`).
      max_steps: Train until the global step reaches this.
      saving_listeners: `CheckpointSaverListener`s of the checkpoint saver.

    Returns:
      self.

    Raises:
      ValueError: both `steps` and `max_steps`, or one that is not positive.
    """
    if steps is not None and max_steps is not None:
      raise ValueError('Can not provide both steps and max_steps.')
    for name, value in (('steps', steps), ('max_steps', max_steps)):
      if value is not None and value <= 0:
        raise ValueError(f'Must specify {name} > 0, given: {value}')
    if max_steps is not None:
      latest = self.latest_checkpoint()
      if latest and (checkpointing.step_of(latest) or 0) >= max_steps:
        logging.info('Skipping training since max_steps has already saved.')
        return self
    config = self._config
    with self._graph():
      self._seed()
      with replicated.scope(config.train_distribute):  # mirrored, as TF's
        global_step = tf.compat.v1.train.get_or_create_global_step()
      if replicated.replicas(config.train_distribute) > 1:  # a MirroredStrategy
        spec, initializer = replicated.train_spec(
            config.train_distribute,
            input_fn(**input_fn_kwargs(input_fn, ModeKeys.TRAIN, self._params, config)),
            self._call_model_fn)
        input_hooks = [_IteratorInitializerHook(initializer)]
      else:
        features, labels, input_hooks = self._input(input_fn, ModeKeys.TRAIN)
        spec = self._call_model_fn(features, labels, ModeKeys.TRAIN,
                                   strategy=config.train_distribute)
      if not warm_start.holds_checkpoint(self._model_dir):
        self._maybe_warm_start(None)
      # TensorBoard's loss curve, unless the model_fn made one, as TF1's did.
      if not any(x.op.name == 'loss' for x in tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.SUMMARIES)):
        tf.compat.v1.summary.scalar('loss', spec.loss)
      tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, spec.loss)
      # TF1's Estimator's order: the input's hooks, the call's, the stop, NaN
      # and logging hooks, the spec's; the chief's: its saver, the spec's.
      worker_hooks = input_hooks + list(hooks or [])
      if steps is not None or max_steps is not None:
        worker_hooks.append(tfmon_train.StopAtStepHook(num_steps=steps, last_step=max_steps))
      worker_hooks.append(tfmon_train.NanTensorHook(spec.loss))
      if config.log_step_count_steps is not None:
        worker_hooks.append(tfmon_train.LoggingTensorHook(
            {'loss': spec.loss, 'step': global_step},
            every_n_iter=config.log_step_count_steps))
      worker_hooks += spec.training_hooks
      scaffold = _scaffold(spec.scaffold)
      chief_hooks = []
      savers = [h for h in worker_hooks + list(spec.training_chief_hooks)
                if isinstance(h, (tfmon_train.CheckpointSaverHook,
                                  tf.compat.v1.train.CheckpointSaverHook))]
      if not savers and (config.save_checkpoints_secs or config.save_checkpoints_steps):
        chief_hooks = savers = [tfmon_train.CheckpointSaverHook(
            self._model_dir, save_secs=config.save_checkpoints_secs,
            save_steps=config.save_checkpoints_steps, scaffold=scaffold,
            max_to_keep=config.keep_checkpoint_max if config.is_chief else 1,
            keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours)]
        if not config.is_chief and workers.count(config.train_distribute) > 1:
          # Every worker takes part in a save (it may read sync-on-read
          # variables across them); the chief's lands in model_dir.
          worker_hooks, chief_hooks = savers + worker_hooks, []
      if saving_listeners:
        if not savers:
          raise ValueError(
              'There should be a CheckpointSaverHook to use saving_listeners. Set '
              'save_checkpoints_steps or save_checkpoints_secs in the RunConfig, or '
              'pass a CheckpointSaverHook in hooks.')
        if config.is_chief:  # TF1's listeners heard the chief's saves only
          # As TF1: the first saver's listeners, which TF's hook keeps there too.
          savers[0]._listeners.extend(  # pylint: disable=protected-access
              l for l in saving_listeners if l not in savers[0]._listeners)  # pylint: disable=protected-access
      loss = None
      with tfmon_train.MonitoredTrainingSession(
          master=config.master, is_chief=config.is_chief,
          checkpoint_dir=self._model_dir, scaffold=scaffold, hooks=worker_hooks,
          chief_only_hooks=chief_hooks + list(spec.training_chief_hooks),
          save_checkpoint_secs=None, save_checkpoint_steps=None,
          save_summaries_steps=config.save_summary_steps,
          config=config.session_config,
          max_wait_secs=config.session_creation_timeout_secs,
          log_step_count_steps=config.log_step_count_steps,
          save_graph_def=config.checkpoint_save_graph_def) as session:
        while not session.should_stop():
          _, loss = session.run([spec.train_op, spec.loss])
    if loss is None:
      logging.warning('Training with estimator made no steps. Perhaps input is '
                      'empty or misspecified.')
    logging.info('Loss for final step: %s.', loss)
    return self

  # ---- evaluation ----

  def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None,
               name=None):
    """Evaluates the model from a checkpoint; returns the metrics' values.

    Args:
      input_fn: As for `train`.
      steps: Evaluate this many batches (default: until the data runs out).
      hooks: `SessionRunHook`s, run before the spec's `evaluation_hooks` (TF1's
        order).
      checkpoint_path: The checkpoint (default: the latest in `model_dir`; with
        none, the initialized or warm-started model, as TF1).
      name: Evaluations of another name go to `eval_<name>`.

    Returns:
      A dict of the `eval_metric_ops` values, `loss` (the mean loss) and
      `global_step`.

    Raises:
      ValueError: `steps` not positive.
    """
    if steps is not None and steps <= 0:
      raise ValueError(f'Must specify steps > 0, given: {steps}')
    checkpoint = self._checkpoint_or_initialization(checkpoint_path, 'evaluate')
    return self._evaluate(input_fn, steps, hooks, checkpoint, name)

  def _evaluate(self, input_fn, steps, hooks, checkpoint, name, variable_values=None):
    """`evaluate` from `checkpoint`, or from `variable_values` (a dict of TF1
    variable name to value, which every global variable of the EVAL graph
    takes: InMemoryEvaluatorHook's)."""
    with self._graph() as graph:
      self._seed()
      global_step = tf.compat.v1.train.get_or_create_global_step()
      features, labels, input_hooks = self._input(input_fn, ModeKeys.EVAL)
      spec = self._call_model_fn(features, labels, ModeKeys.EVAL,
                                 strategy=self._config.eval_distribute)
      if variable_values is None:
        self._maybe_warm_start(checkpoint)
      else:
        input_hooks.insert(0, _AssignByNameHook(variable_values))
      metrics = dict(spec.eval_metric_ops)
      if 'loss' not in metrics:
        metrics['loss'] = tf.compat.v1.metrics.mean(spec.loss)
      values = {key: value for key, (value, _) in metrics.items()}
      values['global_step'] = global_step
      final = tfmon_train.FinalOpsHook(values)
      eval_hooks = input_hooks + list(hooks or []) + [_StopAfterRuns(steps)] + list(
          spec.evaluation_hooks) + [final]  # TF1's order
      update_ops = [update for _, update in metrics.values()]
      logging.info('Starting evaluation at %s',
                   time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime()))
      start = time.time()
      with tfmon_train.MonitoredSession(
          session_creator=tfmon_train.ChiefSessionCreator(
              scaffold=_scaffold(spec.scaffold), config=self._config.session_config,
              checkpoint_filename_with_path=checkpoint),
          hooks=eval_hooks) as session:
        while not session.should_stop():
          session.run(update_ops)
      logging.info('Inference Time : %.5fs', time.time() - start)
      logging.info('Finished evaluation at %s',
                   time.strftime('%Y-%m-%d-%H:%M:%S', time.localtime()))
    results = dict(final.final_ops_values)
    self._write_eval_summaries(self.eval_dir(name), results, checkpoint, graph)
    return results

  def _write_eval_summaries(self, eval_dir, results, checkpoint, graph):
    """Logs and writes the results into `eval_dir` as TF's Estimator did: the
    EVAL `graph` and its MetaGraphDef first (once per directory and process, as
    TF's cached FileWriter wrote them), the scalars as `simple_value`s, and
    the checkpoint evaluated as a string tensor `checkpoint_path`."""
    step = results['global_step']
    # '%s' of a numpy float32 prints its shortest repr (0.93333334), as TF did.
    logging.info('Saving dict for global step %d: %s', step, ', '.join(
        '%s = %s' % (key, results[key]) for key in sorted(results)
        if not isinstance(results[key], bytes)))
    writer = summaries.writer_for(eval_dir)
    if not summaries.graph_written(writer, resumed=False):
      summaries.write_graph_summaries(writer, None, 0, graph,
                                      meta_graph.serialized_or_none(graph))
      summaries.wrote_graph(writer)
    summaries.write_simple_values(
        writer, {k: v for k, v in results.items()
                 if k != 'global_step' and np.ndim(v) == 0}, step)
    if checkpoint:
      logging.info("Saving 'checkpoint_path' summary for global step %d: %s", step,
                   checkpoint)
      summaries.write_summary(writer, tf.compat.v1.Summary(value=[
          tf.compat.v1.Summary.Value(tag='checkpoint_path', tensor=tf.make_tensor_proto(
              checkpoint, dtype=tf.string))]), step)
    summaries.flush(writer)

  # ---- prediction ----

  def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
              yield_single_examples=True):
    """Yields the model's predictions, from a checkpoint, until the data runs out.

    Args:
      input_fn: Returns features (a Dataset of them, or tensors).
      predict_keys: The keys of a dict of predictions to yield (default: all).
      hooks: `SessionRunHook`s, run before the spec's `prediction_hooks` (TF1's
        order).
      checkpoint_path: The checkpoint (default: the latest in `model_dir`; with
        none, the initialized or warm-started model, as TF1).
      yield_single_examples: Yield one example at a time, else whole batches.

    Yields:
      Predictions: numpy values, or dicts of them.

    Raises:
      ValueError: a predict key the predictions lack.
    """
    checkpoint = self._checkpoint_or_initialization(checkpoint_path, 'predict')
    graph = graph_capture.Graph()
    # The graph is the default only while it builds and runs, never across a
    # yield: the caller's code between two predictions runs as it would anyway.
    with self._graph(graph):
      self._seed()
      tf.compat.v1.train.get_or_create_global_step()
      features, _, input_hooks = self._input(input_fn, ModeKeys.PREDICT)
      spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
      self._maybe_warm_start(checkpoint)
      predictions = spec.predictions
      if predict_keys is not None:
        if not isinstance(predictions, dict):
          raise ValueError('predict_keys given, but the predictions are not a dict.')
        missing = sorted(set(predict_keys) - set(predictions))
        if missing:
          raise ValueError(f'Expected to find predict_keys {missing} among the '
                           f'predictions {sorted(predictions)}.')
        predictions = {k: predictions[k] for k in predict_keys}
      session = tfmon_train.MonitoredSession(
          session_creator=tfmon_train.ChiefSessionCreator(
              scaffold=_scaffold(spec.scaffold), config=self._config.session_config,
              checkpoint_filename_with_path=checkpoint),
          hooks=input_hooks + list(hooks or []) + list(spec.prediction_hooks))
    try:
      while True:
        with graph.as_default():
          if session.should_stop():
            break
          try:
            batch = session.run(predictions)
          except tf.errors.OutOfRangeError:
            break
        if not yield_single_examples:
          yield batch
        elif isinstance(batch, dict):
          count = len(next(iter(batch.values())))
          for i in range(count):
            yield {key: value[i] for key, value in batch.items()}
        else:
          yield from batch
    finally:
      with graph.as_default():
        session.close()

  # ---- export ----

  def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                         assets_extra=None, as_text=False, checkpoint_path=None,
                         experimental_mode=ModeKeys.PREDICT):
    """Exports the PREDICT graph, from a checkpoint, as a TF2 SavedModel.

    Builds the graph of `model_fn` on the features of
    `serving_input_receiver_fn`, restores the checkpoint into it, and writes a
    SavedModel (`tf.saved_model.load` reads it) with a signature for each of the
    spec's `export_outputs` (default: `serving_default`, the predictions) into
    `export_dir_base/<unix seconds>`. See tfmon/estimator/export.py.

    Args:
      export_dir_base: The directory in which to make the export's directory.
      serving_input_receiver_fn: Takes no arguments and returns a
        `tfmon.estimator.export.ServingInputReceiver` (or
        `TensorServingInputReceiver`).
      assets_extra: A dict of destination (relative to `assets.extra`) to the
        file to copy there.
      as_text: Write `saved_model.pbtxt` instead of `saved_model.pb`.
      checkpoint_path: The checkpoint (default: the latest in `model_dir`).
      experimental_mode: Must be `ModeKeys.PREDICT`.

    Returns:
      The export's directory, as bytes.

    Raises:
      ValueError: no receiver fn, no checkpoint, variables the checkpoint
        lacks, or several export outputs none of which is the default.
      TypeError: a receiver fn returning something else than a receiver.
    """
    return export_lib.export_saved_model(
        self, export_dir_base, serving_input_receiver_fn, assets_extra=assets_extra,
        as_text=as_text, checkpoint_path=checkpoint_path,
        experimental_mode=experimental_mode)

  def export_savedmodel(self, export_dir_base, serving_input_receiver_fn,
                        assets_extra=None, as_text=False, checkpoint_path=None,
                        strip_default_attrs=False):
    """TF1's name of `export_saved_model` (the PREDICT graph).

    `strip_default_attrs`: TF2's SavedModel writer always leaves out attributes
    at their default values (readers fill them in), which True asked for; False
    is accepted and writes the same.
    """
    del strip_default_attrs  # see the docstring
    return self.export_saved_model(export_dir_base, serving_input_receiver_fn,
                                   assets_extra=assets_extra, as_text=as_text,
                                   checkpoint_path=checkpoint_path)

  def experimental_export_all_saved_models(self, export_dir_base,
                                           input_receiver_fn_map, assets_extra=None,
                                           as_text=False, checkpoint_path=None):
    """Exports the graphs `input_receiver_fn_map` names by mode: the PREDICT
    one, as `export_saved_model` (tfmon exports no TRAIN or EVAL graph).

    Args:
      export_dir_base: The directory in which to make the export's directory.
      input_receiver_fn_map: `{ModeKeys.PREDICT: serving_input_receiver_fn}`.
      assets_extra, as_text, checkpoint_path: As for `export_saved_model`.

    Returns:
      The export's directory, as bytes.

    Raises:
      ValueError: a map without PREDICT, or with TRAIN or EVAL receivers.
    """
    modes = set(input_receiver_fn_map or {})
    if modes != {ModeKeys.PREDICT}:
      raise ValueError(
          f'input_receiver_fn_map has modes {sorted(modes)}: tfmon exports the '
          f'PREDICT graph only ({{ModeKeys.PREDICT: serving_input_receiver_fn}}); a '
          'TRAIN or EVAL SavedModel was a TF1 graph for TF1 sessions. Train from '
          'model_dir.')
    return self.export_saved_model(
        export_dir_base, input_receiver_fn_map[ModeKeys.PREDICT],
        assets_extra=assets_extra, as_text=as_text, checkpoint_path=checkpoint_path)

  def eval_dir(self, name=None):
    """Where `evaluate(name=name)` writes its results."""
    return os.path.join(self._model_dir, 'eval' if not name else f'eval_{name}')

  # ---- checkpoints ----

  def latest_checkpoint(self):
    """The latest checkpoint's path in `model_dir`, or None."""
    return tf.train.latest_checkpoint(self._model_dir)

  def get_variable_names(self):
    """The names of the variables in the latest checkpoint, as TF1 named them."""
    return sorted(warm_start.checkpoint_keys(self._require_checkpoint()))

  def get_variable_value(self, name):
    """The value of variable `name` in the latest checkpoint."""
    path = self._require_checkpoint()
    keys = warm_start.checkpoint_keys(path)
    if name not in keys:
      raise ValueError(f'Variable {name!r} is not in {path}; it holds {sorted(keys)}.')
    return tf.train.load_checkpoint(path).get_tensor(keys[name])

  def _checkpoint_or_initialization(self, checkpoint_path, verb):
    """The checkpoint to `verb` from, or None (TF1 then ran the initialized,
    or warm-started, model, and said so)."""
    checkpoint = checkpoint_path or self.latest_checkpoint()
    if not checkpoint:
      logging.info('Could not find trained model in model_dir: %s, running '
                   'initialization to %s.', self._model_dir, verb)
    return checkpoint

  def _maybe_warm_start(self, checkpoint):
    """Warm-starts the graph being built when nothing is restored into it."""
    if not checkpoint and self._warm_start_settings:
      logging.info('Warm-starting with WarmStartSettings: %s', self._warm_start_settings)
      warm_start.warm_start(*self._warm_start_settings)

  def _require_checkpoint(self):
    path = self.latest_checkpoint()
    if not path:
      raise ValueError(f'Could not find trained model in model_dir: {self._model_dir}.')
    return path

  # ---- helpers ----

  def _seed(self):
    if self._config.tf_random_seed is not None:
      tf.compat.v1.set_random_seed(self._config.tf_random_seed)

  @contextlib.contextmanager
  def _graph(self, graph=None):
    """A new graph (or `graph`) as the default, under `config.device_fn`."""
    graph = graph or graph_capture.Graph()
    with graph.as_default(), graph.device(self._config.device_fn):
      yield graph

  def _input(self, input_fn, mode):
    return call_input_fn(input_fn, mode, self._params, self._config)

  def _call_model_fn(self, features, labels, mode, config=None, strategy=None):
    """The model_fn's spec for `mode`, built on `strategy`'s device (a
    OneDeviceStrategy's) if given."""
    available = {'features': features, 'labels': labels, 'mode': mode,
                 'params': self._params, 'config': config or self._config}
    kwargs = {k: v for k, v in available.items() if k in self._model_fn_args}
    if 'labels' not in self._model_fn_args and labels is not None:
      raise ValueError('model_fn does not take labels, but input_fn returns them.')
    device = run_config_lib.strategy_device(strategy)
    logging.info('Calling model_fn.')
    # device(None) would clear the device_fn's scope.
    with tf.compat.v1.device(device) if device else contextlib.nullcontext(), \
        tf_internals.keras3_names_per_graph(), \
        tf.variable_creator_scope(_name_keras_3_variables):
      spec = self._model_fn(**kwargs)
    logging.info('Done calling model_fn.')
    if not isinstance(spec, EstimatorSpec):
      raise TypeError(f'model_fn must return a tfmon.estimator.EstimatorSpec; got '
                      f'{spec!r} of type {type(spec).__name__}.')
    return spec


def _name_keras_3_variables(next_creator, **kwargs):
  """A variable creator naming a Keras 3 layer's variables by their Keras path
  ('dense/kernel', 'sequential/dense/kernel'), as TF 2.15's Keras named them in
  a model_fn's graph; Keras 3 gave the TensorFlow variable its bare name
  ('kernel', then 'kernel_1'). With the layers' names counted per graph
  (`keras3_names_per_graph`), every mode's graph names them alike.

  A Keras 3 variable is made by Keras 3's code (its initial value a function
  of the `keras` package) on behalf of a `keras.layers.Layer` (a frame's
  `self`); a Keras 3 optimizer's are left alone.
  """
  module = getattr(kwargs.get('initial_value'), '__module__', None) or ''
  if module.split('.')[0] == 'keras' and _calling_keras_3_layer() is not None:
    path = tf_internals.keras3_path()
    name = kwargs.get('name') or 'Variable'
    # A trailing '/' makes the name scope absolute: the path is the whole name.
    kwargs['name'] = f'{path}/{name}/' if path else f'{name}/'
  return next_creator(**kwargs)


def _calling_keras_3_layer():
  """The Keras 3 layer whose code is running, or None."""
  keras = sys.modules.get('keras')
  layer_class = getattr(getattr(keras, 'layers', None), 'Layer', None)
  if layer_class is None:
    return None
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    candidate = frame.f_locals.get('self')
    if isinstance(candidate, layer_class):
      return candidate
    frame = frame.f_back
  return None


class _AssignByNameHook(tf.compat.v1.train.SessionRunHook):
  """Gives the graph's global variables the values of `values` of their TF1
  names (those it lacks keep their initial values, as TF's
  InMemoryEvaluatorHook left them) when a session is created: made while the
  graph builds, its assign ops fed then (the session's graph is finalized)."""

  def __init__(self, values):
    self._feeds = {}
    self._assigns = []
    for variable in tf.compat.v1.global_variables():
      name = variable.name.split(':')[0]
      if name in values:
        value = tf.compat.v1.placeholder(variable.dtype.base_dtype, variable.shape)
        self._assigns.append(variable.assign(value))
        self._feeds[value] = values[name]

  def after_create_session(self, session, coord):
    session.run(self._assigns, feed_dict=self._feeds)


class _StopAfterRuns(tf.compat.v1.train.SessionRunHook):
  """Requests a stop after `runs` runs (None: never), logging 'Evaluation
  [k/runs]' as Estimator's evaluation did (every run, or every tenth of them
  from 20 runs on)."""

  def __init__(self, runs):
    self._runs = runs
    self._done = 0
    self._log_every = 1 if runs is None or runs < 20 else runs // 10

  def after_run(self, run_context, run_values):
    self._done += 1
    if self._runs is None:
      return
    if self._done % self._log_every == 0 or self._done == self._runs:
      logging.info('Evaluation [%d/%d]', self._done, self._runs)
    if self._done >= self._runs:
      run_context.request_stop()


def _check_cluster(config):
  """Refuses a TF_CONFIG cluster `config.train_distribute` does not train on.

  Several workers train under a MultiWorkerMirroredStrategy spanning them (one
  Estimator per worker process, as TF 2.15's did); parameter servers and
  between-graph replication are not run (BUILD_NOTES: Multi-worker).
  """
  if config.training_cluster_size() <= 1:
    return
  spanned = workers.count(config.train_distribute)
  if config.num_ps_replicas == 0 and spanned == config.num_worker_replicas:
    return
  raise ValueError(
      f'TF_CONFIG describes a cluster of {config.num_worker_replicas} workers and '
      f'{config.num_ps_replicas} parameter servers ({config.cluster_spec.as_dict()}), '
      f'and train_distribute={config.train_distribute!r} spans {spanned}: tfmon.estimator '
      'trains on several processes under RunConfig(train_distribute='
      'tf.distribute.MultiWorkerMirroredStrategy()) over the chief and workers of '
      'TF_CONFIG, without parameter servers (docs/distribution.md). Pass that '
      'strategy, or unset TF_CONFIG to train in this process.')


def input_fn_kwargs(input_fn, mode, params, config):
  """What TF's Estimator passed `input_fn`: those of `mode`, `params` and
  `config` its signature names, and `input_context` (one input pipeline) under
  the mode's OneDeviceStrategy, as TF passed it under a strategy.

  Raises:
    TypeError: `input_fn` not callable, or with a required argument of another
      name.
  """
  if not callable(input_fn):
    raise TypeError(f'input_fn={input_fn!r} is not callable.')
  parameters = inspect.signature(input_fn).parameters
  strategy = {ModeKeys.TRAIN: config.train_distribute,
              ModeKeys.EVAL: config.eval_distribute}.get(mode)
  passed = _INPUT_FN_ARGS + (('input_context',) if strategy else ())
  required = sorted(
      name for name, p in parameters.items()
      if p.default is inspect.Parameter.empty and name not in passed and
      p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD))
  if required:
    raise TypeError(f'input_fn has arguments {required}, which Estimator does not '
                    f'pass in mode {mode!r}: it passes any of {list(passed)}, by '
                    'name (input_context under a train_distribute or eval_distribute '
                    'strategy; bind others with functools.partial or a lambda).')
  available = {'mode': mode, 'params': params, 'config': config}
  if strategy:
    # One input pipeline per worker; training under a strategy deals its
    # batches to the replicas (replicated.py), evaluation runs unreplicated.
    available['input_context'] = (replicated.input_context(strategy) if mode == ModeKeys.TRAIN
                                  else tf.distribute.InputContext())
  return {k: v for k, v in available.items() if k in parameters}


def call_input_fn(input_fn, mode, params, config):
  """`(features, labels, hooks)` from what `input_fn` returns (labels may be
  None): a Dataset is read through an initializable iterator (a one-shot one
  cannot hold a shuffle's seed), which a hook initializes, as Estimator did."""
  result = input_fn(**input_fn_kwargs(input_fn, mode, params, config))
  hooks = []
  if isinstance(result, tf.data.Dataset):
    iterator = tf.compat.v1.data.make_initializable_iterator(result)
    hooks.append(_IteratorInitializerHook(iterator.initializer))
    result = iterator.get_next()
  if isinstance(result, tuple) and len(result) == 2:
    return result[0], result[1], hooks
  return result, None, hooks


class _IteratorInitializerHook(tf.compat.v1.train.SessionRunHook):
  """Initializes the input's iterator when a session is created."""

  def __init__(self, initializer):
    self._initializer = initializer

  def after_create_session(self, session, coord):
    session.run(self._initializer)


def _scaffold(scaffold):
  """A tfmon Scaffold for a spec's (None, tfmon's, or TF's own)."""
  if scaffold is None:
    return tfmon_train.Scaffold()
  if isinstance(scaffold, tfmon_train.Scaffold):
    return scaffold
  if isinstance(scaffold, tf.compat.v1.train.Scaffold):
    if scaffold.ready_op is not None:
      logging.info('The spec\'s Scaffold ready_op is ignored: eager variables '
                   'are always ready.')
    # TF's keeps init_fn(scaffold, session) as _init_fn(session); tfmon's
    # Scaffold calls init_fn(scaffold, session).
    tf_init_fn = tf_internals.tf_state(scaffold, '_init_fn')
    return tfmon_train.Scaffold(
        init_fn=tf_init_fn and (lambda _, session: tf_init_fn(session)),
        saver=scaffold.saver)
  raise TypeError(f'EstimatorSpec scaffold={scaffold!r} is not a Scaffold.')


