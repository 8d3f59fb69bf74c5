"""EvaluationHook: evaluates on a validation dataset during training.

The hook every TF1 port writes by hand: Estimator's `InMemoryEvaluatorHook`, for
a step-function training loop. Each evaluation is one `session.run` of one
compiled loop over the whole validation dataset, so it costs one call, and
repeated evaluations reuse the same trace.
"""

import collections
import functools
import inspect
import numbers
import os

from tfmon import tf_logging as logging
import numpy as np
import tensorflow as tf

from tfmon import paths
from tfmon import summaries
from tfmon import training_util
from tfmon.compiled import alongside
from tfmon.compiled.fetch_plan import describe
from tfmon.hook_api import SessionRunArgs, SessionRunHook
from tfmon.hooks.timing import steps_until_trigger


def dict_to_str(dictionary):
  """Estimator's `_dict_to_str`: `'k1 = v1, k2 = v2'`, keys sorted, bytes skipped."""
  return ', '.join('%s = %s' % (k, v)
                   for k, v in sorted(dictionary.items())
                   if not isinstance(v, bytes))


def _eval_arguments(element):
  """How eval_step receives one dataset element: as `Dataset.map` passes it.

  A plain tuple is spread into positional arguments (`(features, labels)` ->
  `eval_step(features, labels)`); anything else, a dict or a single tensor
  included, is one argument. Namedtuples are not spread, as in `Dataset.map`.
  """
  # pylint: disable-next=unidiomatic-typecheck
  return element if type(element) is tuple else (element,)


def _check_signature(eval_step, element_spec):
  """Raises TypeError if eval_step cannot take the dataset's elements."""
  fn = eval_step
  if isinstance(fn, tf.types.experimental.PolymorphicFunction):
    fn = fn.python_function
  try:
    signature = inspect.signature(fn)
  except (TypeError, ValueError):
    return  # a builtin without a signature: the first trace will tell
  arguments = _eval_arguments(element_spec)
  try:
    signature.bind(*arguments)
  except TypeError as e:
    if type(element_spec) is tuple:  # pylint: disable=unidiomatic-typecheck
      shape = (f'{len(arguments)}-tuples, so eval_step is called with '
               f'{len(arguments)} positional arguments (as Dataset.map calls its '
               'function): eval_step(features, labels) for (features, labels) '
               'elements')
    else:
      shape = ('not tuples, so eval_step is called with one positional argument: '
               'eval_step(batch)')
    raise TypeError(
        f'eval_step {describe(eval_step)}{signature} cannot take the elements of '
        f'the dataset ({e}). The elements ({element_spec}) are {shape}. Change '
        'eval_step\'s parameters, or map the dataset to the elements it takes.'
    ) from None


def _check_batched(spec):
  """Raises ValueError if the dataset's elements have no batch dimension to count."""
  first = tf.nest.flatten(spec)[0]
  shape = getattr(first, 'shape', None)
  if shape is not None and shape.rank == 0:
    raise ValueError(
        f'EvaluationHook needs a batched dataset, but its elements ({spec}) start '
        'with a scalar, which has no batch dimension to weight the averages by. '
        'Batch it: dataset.batch(batch_size).')


def _batch_size(batch):
  """The number of examples in `batch`: the leading dimension of its first component."""
  first = tf.nest.flatten(batch)[0]
  if isinstance(first, tf.RaggedTensor):
    return first.nrows()
  if isinstance(first, tf.SparseTensor):
    return first.dense_shape[0]
  return tf.shape(first, out_type=tf.int64)[0]


def _named_metrics(metrics):
  """`metrics` as an ordered dict from result name to Keras-style metric."""
  if metrics is None:
    return collections.OrderedDict()
  if isinstance(metrics, dict):
    items = list(metrics.items())
  elif isinstance(metrics, (list, tuple)):
    items = [(getattr(metric, 'name', None), metric) for metric in metrics]
  else:
    raise TypeError(
        f'EvaluationHook metrics must be a list of Keras metrics (named by their '
        f'`name`) or a dict from result name to metric; got {metrics!r}.')
  named = collections.OrderedDict()
  for name, metric in items:
    reset = getattr(metric, 'reset_state', None)
    if not callable(reset) or not callable(getattr(metric, 'result', None)):
      raise TypeError(
          f'EvaluationHook metric {metric!r} is not a Keras metric: it needs '
          '`reset_state()` and `result()`. Pass objects such as '
          'keras.metrics.SparseCategoricalAccuracy() and update them in eval_step.')
    if not isinstance(name, str) or not name:
      raise ValueError(f'EvaluationHook metric {metric!r} has no usable name '
                       f'({name!r}): pass metrics as a dict {{name: metric}}.')
    if name in named:
      raise ValueError(
          f'EvaluationHook metrics has two metrics named {name!r}. Give them distinct '
          "names: metrics={'top1': metric_a, 'top5': metric_b}.")
    if name == 'global_step':
      raise ValueError("EvaluationHook metric name 'global_step' is reserved for the "
                       'step of the evaluation (as Estimator). Rename the metric.')
    named[name] = metric
  return named


def _check_positive(value, name, kind=numbers.Real):
  if value is None:
    return
  if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
    what = 'int' if kind is numbers.Integral else 'number'
    raise ValueError(f'EvaluationHook {name} must be a positive {what} or None; '
                     f'got {value!r}.')


def _check_scalar(value, description):
  """Raises unless `value` (maybe of a finished trace) is a numeric scalar tensor."""
  dtype = tf.as_dtype(value.dtype)
  if not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
    raise TypeError(
        f'{description} is a {dtype.name} tensor; evaluation results must be '
        'numeric scalars.')
  if value.shape.rank is not None and value.shape.rank != 0:
    raise ValueError(
        f'{description} has shape {value.shape}; evaluation results must be scalars '
        '(one number per batch). Reduce it, e.g. tf.reduce_mean(per_example_loss).')


def _as_scalar(value, description):
  """`value` as a scalar float64 tensor, or a precise error at trace time."""
  value = tf.convert_to_tensor(value)
  _check_scalar(value, description)
  return tf.reshape(tf.cast(value, tf.float64), [])


_EVENT_FILE_GLOB_PATTERN = 'events.out.tfevents.*'


def _scalar_value(value):
  """The float in a Summary.Value: v1's simple_value or a TF2 scalar tensor, else None."""
  if value.HasField('simple_value'):
    return value.simple_value
  if value.HasField('tensor') and value.metadata.plugin_data.plugin_name == 'scalars':
    array = tf.make_ndarray(value.tensor)
    if array.ndim == 0:
      return float(array)
  return None


def read_eval_metrics(eval_dir):
  """Reads the scalars of the event files in `eval_dir`, as Estimator's function.

  Estimator read v1 `simple_value`s only; TF2's `tf.summary.scalar` writes
  tensors, so scalar tensors of the `scalars` plugin are read too. Files are read
  in name order (their names start with the creation time), so when two files
  hold the same tag at the same step, the later one wins. They are read with
  TensorBoard's own loader rather than Estimator's `summary_iterator`, which
  raises DataLossError on the partial record at the end of a file that another
  process (an evaluator job) is writing. As TensorBoard, a `SessionLog.START`
  event (tfmon's EvaluationHook writes one when a session starts) drops the
  results read so far at its step and after: evaluations of a run that a
  resumed job superseded.

  Args:
    eval_dir: The directory of event files. A missing directory has no results.

  Returns:
    An `OrderedDict` from global step to a dict from tag to float, sorted by step.
  """
  # Imported here: TensorBoard's loader brings its TF stub (and boto3 where it is
  # installed), ~90 ms that every `import tfmon` would pay at a job's start.
  from tensorboard.backend.event_processing import event_file_loader  # pylint: disable=g-import-not-at-top
  eval_metrics_dict = collections.defaultdict(dict)
  eval_dir = os.fspath(eval_dir)
  # tf.io.gfile, as Estimator's gfile.Glob: eval_dir may be on GCS or HDFS.
  for event_file in sorted(tf.io.gfile.glob(os.path.join(eval_dir,
                                                         _EVENT_FILE_GLOB_PATTERN))):
    for event in event_file_loader.LegacyEventFileLoader(event_file).Load():
      if (event.HasField('session_log') and
          event.session_log.status == tf.compat.v1.SessionLog.START):
        for step in [step for step in eval_metrics_dict if step >= event.step]:
          del eval_metrics_dict[step]
      if not event.HasField('summary'):
        continue
      metrics = {}
      for value in event.summary.value:
        scalar = _scalar_value(value)
        if scalar is not None:
          metrics[value.tag] = scalar
      if metrics:
        eval_metrics_dict[event.step].update(metrics)
  return collections.OrderedDict(sorted(eval_metrics_dict.items(), key=lambda t: t[0]))


class EvaluationHook(SessionRunHook):
  """Evaluates a step function over a validation dataset every N steps or seconds.

  Each evaluation runs `eval_step` on every batch of `dataset` in one compiled
  call (a loop over a fresh iterator of the dataset, so the training
  input is never touched and every evaluation sees the whole dataset), and
  aggregates two kinds of results:

  * the dict of scalars `eval_step` returns, each averaged over the dataset
    weighted by batch size (the leading dimension of the element's first
    component), so a per-batch mean loss becomes the mean over all examples;
  * `metrics`, Keras metrics that `eval_step` updates itself: the hook resets
    them before each evaluation and reports `result()` after it.

  The results, with `'global_step'` added as Estimator did, are logged as
  Estimator's `Saving dict for global step 10: accuracy = 0.91, global_step = 10,
  loss = 0.23`, written as scalars at the global step to event files in
  `<summary_dir>/<name>` (Estimator's `model_dir/eval` for the defaults), kept in
  `latest_results` and, for other hooks such as early stopping, in
  `results_by_step`. Averages are float32 numpy scalars, metrics are their
  `result()` as numpy, the global step is an int.

  `eval_step` is called as `Dataset.map` calls its function: an element that is a
  tuple `(features, labels)` is spread, `eval_step(features, labels)`; any other
  element (a dict, a tensor) is passed whole, `eval_step(batch)`. It must not
  change training state: it should call the model with `training=False` and
  never apply gradients or increment the global step (the hook checks the
  latter). It is traced once per hook and then reused: during the session's
  first run, alongside TensorFlow's optimization of the training step (so a
  bad return value fails that run), or at creation with `at_start` or under
  a distribution strategy. In the first run's case the evaluation's function
  is also built then and run over no batches, so that TensorFlow optimizes it
  there too (a run that only resets `metrics`): the first evaluation costs
  what later ones do.

  Evaluation triggers on the post-step global step, as v1's periodic hooks do:
  the timer starts when the session is created, so `every_n_steps=100` from step
  0 evaluates at steps 100, 200, ...; with `at_end`, the session's `end`
  evaluates the final step unless it was just evaluated; with `at_start`, the
  model is evaluated once before training as `InMemoryEvaluatorHook` did.

  Place this hook before hooks that read its results (early stopping) so that
  they see an evaluation in the run that made it.

  Example:

    accuracy = keras.metrics.SparseCategoricalAccuracy()

    def eval_step(features, labels):
      logits = model(features, training=False)
      accuracy.update_state(labels, logits)
      return {'loss': loss_fn(labels, logits)}

    evaluation = EvaluationHook(eval_step, validation_dataset, every_n_steps=1000,
                                metrics={'accuracy': accuracy}, summary_dir=model_dir)

  Args:
    eval_step: A callable (or `tf.function`) taking one batch as above and
      returning a dict from name to scalar tensor, or None if `metrics` carry
      every result.
    dataset: A batched `tf.data.Dataset` of validation data, finite.
    every_n_steps: Evaluate every N global steps.
    every_n_secs: Evaluate every N seconds.
    at_end: Evaluate the final model in `end`, unless that step was evaluated.
    name: The evaluation's name: the subdirectory of `summary_dir` for its event
      files.
    summary_dir: Directory under which the event files go (`<summary_dir>/<name>`);
      None writes no event files.
    metrics: Keras metrics updated by `eval_step`: a list (results named by each
      metric's `name`) or a dict from result name to metric.
    at_start: Also evaluate when the session is created, before the first step.

  Raises:
    TypeError: `eval_step` not callable or unable to take the dataset's
      elements, `dataset` not a `tf.data.Dataset`, or `metrics` not Keras metrics.
    ValueError: both `every_n_steps` and `every_n_secs`, a non-positive period,
      an empty, infinite or unbatched dataset, a bad `name`, or clashing
      metric names.
  """

  def __init__(self, eval_step, dataset, every_n_steps=None, every_n_secs=None,
               at_end=True, name='eval', summary_dir=None, metrics=None,
               at_start=False):
    if not callable(eval_step):
      raise TypeError(f'EvaluationHook eval_step must be callable (a function '
                      f'taking one batch); got {eval_step!r}.')
    if not isinstance(dataset, tf.data.Dataset):
      raise TypeError(
          f'EvaluationHook dataset must be a tf.data.Dataset; got {dataset!r} of type '
          f'{type(dataset).__name__}. Wrap arrays with '
          'tf.data.Dataset.from_tensor_slices((features, labels)).batch(n).')
    if every_n_steps is not None and every_n_secs is not None:
      raise ValueError(
          'EvaluationHook takes at most one of every_n_steps and every_n_secs; got '
          f'every_n_steps={every_n_steps!r} and every_n_secs={every_n_secs!r}.')
    _check_positive(every_n_steps, 'every_n_steps', numbers.Integral)
    _check_positive(every_n_secs, 'every_n_secs')
    if not isinstance(name, str) or not name or os.sep in name:
      raise ValueError(f'EvaluationHook name must be a non-empty string without '
                       f'{os.sep!r} (it names the event-file subdirectory); got '
                       f'{name!r}.')
    cardinality = int(dataset.cardinality())
    if cardinality == 0:
      raise ValueError('EvaluationHook dataset is empty (cardinality 0): there is '
                       'nothing to evaluate on.')
    if cardinality == tf.data.INFINITE_CARDINALITY:
      raise ValueError(
          'EvaluationHook dataset is infinite (a repeat() without count?): each '
          'evaluation iterates it to the end. Pass the finite validation dataset.')
    _check_batched(dataset.element_spec)
    _check_signature(eval_step, dataset.element_spec)
    self._dataset = dataset
    self._name = name
    self._metrics = _named_metrics(metrics)
    # tf.function(eval_step) is traced once, in after_create_session, and that
    # trace is reused by the compiled loop (same input signature: no retrace).
    self._eval_function = (
        eval_step if isinstance(eval_step, tf.types.experimental.PolymorphicFunction)
        else tf.function(eval_step))
    self._eval_step_name = describe(eval_step)
    self._eval_keys = None  # the names eval_step returns, known once traced
    self._trace = None  # the Pending trace of eval_step, until it is awaited
    self._warm_up = None  # the Pending first run of this session's evaluation
    self._timer = None
    self._every_n_steps = every_n_steps
    if every_n_steps is not None or every_n_secs is not None:
      self._timer = tf.compat.v1.train.SecondOrStepTimer(
          every_secs=every_n_secs, every_steps=every_n_steps)
    self._at_end = at_end
    self._at_start = at_start
    summary_dir = paths.check_directory(summary_dir, 'EvaluationHook summary_dir')
    self._eval_dir = (os.path.join(summary_dir, name)
                      if summary_dir is not None else None)
    self._writer = (summaries.writer_for(self._eval_dir)
                    if summary_dir is not None else None)
    self._results_by_step = collections.OrderedDict()
    self._latest_results = None

  @property
  def name(self):
    """The evaluation's name (the event-file subdirectory)."""
    return self._name

  @property
  def latest_results(self):
    """The results of the latest evaluation (with 'global_step'), or None."""
    return None if self._latest_results is None else dict(self._latest_results)

  @property
  def results_by_step(self):
    """Every evaluation of this session: an ordered dict from global step to results."""
    return collections.OrderedDict(
        (step, dict(results)) for step, results in self._results_by_step.items())

  @property
  def metric_names(self):
    """The sorted result names (without 'global_step'), or None before the session."""
    if self._traced_keys() is None:
      return None
    return sorted(list(self._eval_keys) + list(self._metrics))

  def _traced_keys(self):
    """The names eval_step returns: traces it here, or waits for the trace under way."""
    if self._trace is not None:
      self._eval_keys = self._trace.result()  # raises again if asked again
      self._trace = None
    return self._eval_keys

  def begin(self):
    self._global_step_tensor = training_util.require_global_step('EvaluationHook')
    if self._timer is not None:
      self._timer.reset()
    self._results_by_step = collections.OrderedDict()
    self._latest_results = None
    self._last_evaluated_step = None

  def after_create_session(self, session, coord):
    self._cancel_warm_up()  # an earlier session's, if that never ran a call
    # Alongside the first training call, while TensorFlow optimizes its graph,
    # which leaves Python and a core idle: free, where here it delays training.
    in_first_call = not (self._at_start or tf.distribute.has_strategy())
    if self._traced_keys() is None:  # an earlier session's failed trace raises
      if in_first_call:
        # Run by the warm-up, or here if metric_names is asked for first.
        self._trace = alongside.Pending(self._trace_eval_step)
      else:
        self._eval_keys = self._trace_eval_step()
    if in_first_call:
      self._warm_up = session.alongside_next_call(
          functools.partial(self._warm_up_evaluation, session))
    global_step = int(session.run(self._global_step_tensor))
    if self._writer is not None:
      if (self._at_start or self._at_end) and self._last_evaluated_step is None:
        self._take_earlier_evaluation(global_step)
      # TensorBoard then drops what an earlier run of the job evaluated after
      # the checkpoint this session resumes from (it evaluates those steps again).
      summaries.write_session_start(self._writer, global_step + 1)
    if self._timer is not None:
      self._timer.update_last_triggered_step(global_step)
    if self._at_start and global_step != self._last_evaluated_step:
      self._evaluate(session, global_step)

  def _take_earlier_evaluation(self, global_step):
    """Counts an evaluation of `global_step` in the event files as this hook's
    last: a re-run of a finished job (no step to train) would evaluate the same
    step again at start or end, and TensorBoard would show two points there."""
    earlier = read_eval_metrics(self._eval_dir).get(global_step)
    if earlier is None:
      return
    logging.info('Global step %d was evaluated by an earlier run (event files in '
                 '%s): not evaluating it again.', global_step, self._eval_dir)
    self._last_evaluated_step = global_step
    self._latest_results = dict(earlier, global_step=global_step)

  def steps_until_observed(self, global_step):
    if self._timer is None:
      return None  # evaluates only at start and end
    return steps_until_trigger(self._timer, self._every_n_steps, global_step)

  def before_run(self, run_context):
    if self._timer is None:
      return None
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    if self._timer is None:
      return
    stale_global_step = int(run_values.results)
    if self._timer.should_trigger_for_step(stale_global_step + 1):
      # The fetched value is from before the step: read the real one.
      global_step = training_util.global_step_after_run(
          run_context, self._global_step_tensor)
      if self._timer.should_trigger_for_step(global_step):
        self._timer.update_last_triggered_step(global_step)
        self._evaluate(run_context.session, global_step)

  def end(self, session):
    if not self._at_end:
      return
    global_step = int(session.run(self._global_step_tensor))
    if global_step != self._last_evaluated_step:
      self._evaluate(session, global_step)

  def _warm_up_evaluation(self, session):
    """Builds the evaluation's function and runs it over no batches (it resets the
    metrics and reads no input): TensorFlow optimizes a function at its first
    call, and that cost is paid here rather than at the first evaluation."""
    if self._traced_keys() is not None:  # traces eval_step; raises its error
      self._run_evaluation_loop(session, batches=0)

  def _cancel_warm_up(self):
    if self._warm_up is not None:
      self._warm_up.cancel()
      self._warm_up = None

  def _run_evaluation_loop(self, session, batches=-1):
    """Runs the evaluation over the dataset's first `batches` batches (-1: all)."""
    return session.run(self._evaluation_loop,
                       feed_dict={'batches': tf.constant(batches, tf.int64)})

  def _trace_eval_step(self):
    """Traces eval_step for the dataset's elements; returns the names it returns."""
    arguments = _eval_arguments(self._dataset.element_spec)
    try:
      outputs = self._eval_function.get_concrete_function(*arguments).structured_outputs
    except Exception as e:
      if hasattr(e, 'add_note'):  # Python 3.11+
        e.add_note(f'(raised while tracing EvaluationHook eval_step '
                   f'{self._eval_step_name} for dataset elements '
                   f'{self._dataset.element_spec})')
      raise
    if outputs is None:
      if not self._metrics:
        raise ValueError(
            f'EvaluationHook eval_step {self._eval_step_name} returned None and no '
            'metrics were given: there is nothing to report. Return a dict of '
            "scalars ({'loss': loss}) or pass metrics=[...] that eval_step updates.")
      return ()
    if not isinstance(outputs, dict) or not all(isinstance(k, str) for k in outputs):
      raise TypeError(
          f'EvaluationHook eval_step {self._eval_step_name} returned {outputs!r}; it '
          "must return a dict from name to scalar tensor ({'loss': loss}) or None.")
    for key, value in outputs.items():
      if not isinstance(value, tf.Tensor):
        raise TypeError(
            f'EvaluationHook eval_step {self._eval_step_name} result {key!r} is '
            f'{value!r}; results must be scalar tensors.')
      _check_scalar(value, f'eval_step {self._eval_step_name} result {key!r}')
      if key == 'global_step':
        raise ValueError(
            f"eval_step {self._eval_step_name} returned 'global_step', which is "
            'reserved for the step of the evaluation (as Estimator). Rename it.')
      if key in self._metrics:
        raise ValueError(
            f'eval_step {self._eval_step_name} returned {key!r}, which is also the '
            f'name of a metric in metrics ({self._metrics[key]!r}). Rename one.')
    return tuple(sorted(outputs))

  # tfmon's own loop, a tf.while_loop already: autograph converting it (the
  # session converts the step functions it runs) would only cost trace time.
  # eval_step is a tf.function of its own, which converts it.
  @tf.autograph.experimental.do_not_convert
  def _evaluation_loop(self, batches):
    """The step function of an evaluation: one pass over the dataset.

    Args:
      batches: An int64 scalar: how many batches to take, -1 for all of them.

    Returns:
      A dict: 'sums' (batch-size-weighted sums of eval_step's results),
      'examples' (the number of examples), 'metrics' (each metric's result).
    """
    for metric in self._metrics.values():
      metric.reset_state()

    def accumulate(sums, examples, element):
      outputs = self._eval_function(*_eval_arguments(element)) or {}
      size = tf.cast(_batch_size(element), tf.float64)
      sums = {key: sums[key] + size * _as_scalar(
          outputs[key], f'eval_step result {key!r}') for key in self._eval_keys}
      return sums, examples + size

    # A fresh iterator on every call, so each evaluation sees the whole dataset
    # and the training input is not touched. A while_loop over it rather than
    # Dataset.reduce (what autograph makes of `for batch in dataset`): reduce
    # runs eval_step as a tf.data function, which TensorFlow instantiates and
    # optimizes again at every call (+0.5 s an evaluation on ResNet-50).
    # With `batches` 0 the iterator ends at once, without touching the input.
    iterator = iter(self._dataset.take(batches))

    def body(sums, examples, element):
      sums, examples = accumulate(sums, examples, element.get_value())
      return sums, examples, iterator.get_next_as_optional()

    initial = ({key: tf.constant(0., tf.float64) for key in self._eval_keys},
               tf.constant(0., tf.float64), iterator.get_next_as_optional())
    sums, examples, _ = tf.while_loop(
        lambda sums, examples, element: element.has_value(), body, initial,
        parallel_iterations=1)
    return {
        'sums': sums,
        'examples': examples,
        'metrics': {name: tf.reshape(metric.result(), [])
                    for name, metric in self._metrics.items()},
    }

  def _evaluate(self, session, global_step):
    """Runs one evaluation at `global_step`, then logs, records and keeps its results."""
    self._traced_keys()
    self._cancel_warm_up()  # not needed any more, if no call has run it
    outputs = self._run_evaluation_loop(session)
    examples = float(outputs['examples'])
    if examples == 0:
      raise ValueError(
          f'EvaluationHook {self._name!r}: the dataset yielded no examples at global '
          f'step {global_step}, so there is nothing to average. Check the '
          'validation input (a filter that drops everything? a shard of nothing?).')
    if int(self._global_step_tensor.numpy()) != global_step:
      raise RuntimeError(
          f'EvaluationHook {self._name!r}: eval_step {self._eval_step_name} changed '
          f'the global step from {global_step} to '
          f'{int(self._global_step_tensor.numpy())}. An evaluation must not change '
          'training state: remove the increment from eval_step.')
    results = {key: np.float32(total / examples)
               for key, total in outputs['sums'].items()}
    results.update(outputs['metrics'])
    results['global_step'] = global_step
    logging.info('Saving dict for global step %d: %s', global_step,
                 dict_to_str(results))
    if self._writer is not None:
      self._write_summaries(results, global_step)
    self._last_evaluated_step = global_step
    self._latest_results = results
    self._results_by_step[global_step] = results
    return results

  def _write_summaries(self, results, global_step):
    # As Estimator's _write_dict_to_summary: one Summary of simple_values,
    # without 'global_step' (the event's step), whatever recording condition
    # the caller set (an evaluation's results are few and always wanted).
    summaries.write_simple_values(
        self._writer, {key: value for key, value in sorted(results.items())
                       if key != 'global_step'}, global_step)
    self._writer.flush()
