"""tfmon against what users would pick instead, for the same model, data and duties.

Every variant trains the same model on the same fixed batch (a tf.data dataset of
one batch, repeated) and does the same duties: a checkpoint every 1,000 steps, the
loss scalar summary every 100, global_step/sec every 100, the loss logged every
100, a NaN check on the loss every step, and stopping at its last step.

  (a) a plain TF2 loop: a tf.function step called from Python, duties by hand;
  (b) tfmon's MonitoredTrainingSession running `op(step)`, one step per run;
  (c) the same with `steps_per_loop=100` (step fusion), when tfmon has it;
  (d) TF1's own MonitoredTrainingSession in graph mode, in a worker process (graph
      mode cannot share a process with eager), the model written with
      tf.compat.v1 variables and tf.nn ops; and its bare MonitoredSession, no hooks;
  (e) Keras `Model.fit` with ModelCheckpoint, TensorBoard, TerminateOnNaN and a
      small logging callback, at steps_per_execution 1 and 100; and fit at 100
      with no callbacks.

Each variant is one training run of warm-up + rounds x steps steps, kept alive
across rounds (so it traces once, before timing; Keras: one `fit` call a round,
on the same model and callback objects); each round advances every variant by the
same number of steps, in an order rotated every round, with the objects alive
after warm-up kept from the cycle collector (overhead.long_lived_objects_frozen).
The graph-mode worker takes its turn in that order: the parent waits while it
runs. Prints, per model, the median steps/sec of each variant and the median of
its same-round ratios to (a) (the machines are shared and noisy: only same-round
ratios mean anything), then issue 6's targets; after the MLP, the cost of 50
idle hooks, measured by benchmarks.overhead.

  python -m benchmarks.compare [--model mlp|cnn|both] [--rounds N] [--steps N]
"""

import argparse
import collections
import contextlib
import dataclasses
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import logging  # pylint: disable=g-import-not-at-top
import keras
import numpy as np
import tensorflow as tf

import tfmon
from benchmarks import overhead

# The worker runs as `python -m benchmarks.compare` from here: benchmarks/ is not
# an installed package.
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER_FLAG = '--graph-mode-worker'

PLAIN = '(a) plain TF2 loop, duties by hand'
TFMON = '(b) tfmon MonitoredTrainingSession'
TFMON_FUSED = '(c) tfmon, steps_per_loop={fused}'
TF1 = '(d) TF1 MonitoredTrainingSession, graph'
TF1_BARE = '(d) TF1 MonitoredSession, no hooks'
KERAS = '(e) Keras fit, steps_per_execution=1'
KERAS_FUSED = '(e) Keras fit, steps_per_execution={fused}'
KERAS_BARE = '(e) Keras fit, steps_per_execution={fused}, no callbacks'


@dataclasses.dataclass(frozen=True)
class Duties:
  """How often each variant checkpoints, records summaries and logs, in steps.

  `fused_steps` is the steps per call of the fused variants (tfmon's
  `steps_per_loop`, Keras' `steps_per_execution`).
  """
  checkpoint_steps: int = 1000
  summary_steps: int = 100
  log_steps: int = 100  # the loss and global_step/sec
  fused_steps: int = 100


class Unavailable(Exception):
  """A variant this installation cannot run; the table says why."""


# --- The models: overhead.py's Keras models, and the same as tf.compat.v1 ops. ---


def _graph_variable(name, shape):
  # Keras' defaults: glorot-uniform kernels, zero biases.
  initializer = (tf.compat.v1.zeros_initializer() if name == 'bias'
                 else tf.compat.v1.glorot_uniform_initializer())
  return tf.compat.v1.get_variable(name, shape, initializer=initializer)


def _graph_dense(inputs, units, name, relu):
  with tf.compat.v1.variable_scope(name):
    kernel = _graph_variable('kernel', [int(inputs.shape[-1]), units])
    outputs = tf.nn.bias_add(tf.matmul(inputs, kernel), _graph_variable('bias', [units]))
  return tf.nn.relu(outputs) if relu else outputs


def _graph_conv_pool(inputs, filters, name):
  """Conv2D(filters, 3, relu) then MaxPooling2D(), with Keras' 'valid' padding."""
  with tf.compat.v1.variable_scope(name):
    kernel = _graph_variable('kernel', [3, 3, int(inputs.shape[-1]), filters])
    outputs = tf.nn.conv2d(inputs, kernel, strides=1, padding='VALID')
    outputs = tf.nn.relu(tf.nn.bias_add(outputs, _graph_variable('bias', [filters])))
  return tf.nn.max_pool2d(outputs, ksize=2, strides=2, padding='VALID')


def _graph_mlp(images):
  return _graph_dense(_graph_dense(images, 64, 'dense', relu=True), 10, 'logits',
                      relu=False)


def _graph_cnn(images):
  features = _graph_conv_pool(_graph_conv_pool(images, 32, 'conv1'), 64, 'conv2')
  features = tf.reshape(features, [int(images.shape[0]), -1])
  return _graph_dense(_graph_dense(features, 128, 'dense', relu=True), 10, 'logits',
                      relu=False)


@dataclasses.dataclass(frozen=True)
class Model:
  """A model in both forms, its input and its default measurement."""
  keras_fn: object
  graph_fn: object
  input_shape: tuple  # including the batch dimension
  default_rounds: int
  default_steps: int  # per round
  warmup_steps: int


MODELS = {
    'mlp': Model(overhead.mlp_model, _graph_mlp, overhead.MLP_INPUT_SHAPE,
                 default_rounds=9, default_steps=2000, warmup_steps=200),
    # 30-60 ms a step on 2 shared cores: 1,000 steps of 8 variants is 6-8 minutes.
    # Rounds of 100 steps still hold one summary and log step each. With 5
    # rounds the medians moved by 2-3% between runs, as much as the CNN
    # targets' margins; 9 rounds also reach step 1,000, so one checkpoint is timed.
    'cnn': Model(overhead.cnn_model, _graph_cnn, overhead.CNN_INPUT_SHAPE,
                 default_rounds=9, default_steps=100, warmup_steps=100),
}


def fixed_batch(model_name):
  """The one batch every variant trains on (the same in the worker process)."""
  shape = MODELS[model_name].input_shape
  rng = np.random.default_rng(0)
  return (rng.normal(size=shape).astype(np.float32),
          rng.integers(0, 10, size=shape[0]).astype(np.int64))


def repeated_batch(model_name):
  return tf.data.Dataset.from_tensors(fixed_batch(model_name)).repeat()


# --- Checking that a variant did its duties. ---


def checkpoint_steps(directory):
  """The global steps of the TF-format checkpoints kept in `directory`."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return []
  return sorted(int(path.rsplit('-', 1)[-1]) for path in state.all_model_checkpoint_paths)


def _require_duties_done(variant, directory, duties, last_step, keras_weights=False):
  """Raises unless `directory` holds an event file and, if the run reached
  `duties.checkpoint_steps`, a checkpoint saved on the step timer (not only at
  creation or at the end): TF-format, or Keras `.weights.h5` files."""
  missing = []
  if not glob.glob(os.path.join(directory, '**', 'events.out.tfevents.*'),
                   recursive=True):
    missing.append('write summaries')
  if keras_weights:
    checkpointed = glob.glob(os.path.join(directory, '*.weights.h5'))
  else:
    checkpointed = any(step > 0 and step % duties.checkpoint_steps == 0
                       for step in checkpoint_steps(directory))
  if last_step >= duties.checkpoint_steps and not checkpointed:
    missing.append(f'checkpoint every {duties.checkpoint_steps} steps')
  if missing:
    raise RuntimeError(f'{variant} did not {" or ".join(missing)}: {directory} holds '
                       f'{sorted(os.listdir(directory))}')


# --- The in-process variants. Each is one training run, advanced round by round. ---


class _Variant:
  """One training run of `last_step` steps, advanced a round at a time.

  Subclasses set `directory` (where its checkpoints and summaries go, or None).
  """
  directory = None

  def run(self, steps):
    """Advances the run by `steps` steps (fewer at its last step).

    Returns:
      `(steps_run, seconds)`.
    """
    raise NotImplementedError

  def close(self):
    """Ends the run; raises if it did not stop at its last step or skipped a duty."""


class _EagerJob:
  """The TF2 model, optimizer, input and global step of one run of (a), (b) or (c)."""

  def __init__(self, model_name):
    keras.utils.set_random_seed(0)
    self.model = MODELS[model_name].keras_fn()
    self.optimizer = keras.optimizers.SGD(0.01)
    # Each run counts its own steps: a fresh global step in TF's registry.
    tf.compat.v1.get_default_graph().clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)
    self.global_step = tfmon.train.get_or_create_global_step()
    self._batches = iter(repeated_batch(model_name))
    self._loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def step(self):
    images, labels = next(self._batches)  # inside the step, as the README shows
    with tf.GradientTape() as tape:
      loss = self._loss_fn(labels, self.model(images, training=True))
    grads = tape.gradient(loss, self.model.trainable_variables)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    tf.summary.scalar('loss', loss)  # recorded when the writer and record_if say so
    self.global_step.assign_add(1)
    return {'loss': loss}

  @contextlib.contextmanager
  def registered(self):
    """Makes this run's global step TF's registered one while its code runs."""
    graph = tf.compat.v1.get_default_graph()
    graph.clear_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)
    graph.add_to_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP, self.global_step)
    yield


class PlainLoop(_Variant):
  """(a) What a TF2 user writes by hand: a tf.function step and a Python loop that
  reads the loss every step for a NaN check, logs the loss and global_step/sec
  every `log_steps`, records summaries through `record_if`, and saves with a
  CheckpointManager."""

  name = PLAIN

  def __init__(self, model_name, directory, last_step, duties):
    self.directory = directory
    self._duties = duties
    self._last_step = last_step
    self._job = _EagerJob(model_name)
    self._train_step = tf.function(self._job.step)
    global_step = self._job.global_step
    self._manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=self._job.model, optimizer=self._job.optimizer,
                            global_step=global_step),
        directory, max_to_keep=5)
    self._writer = tf.summary.create_file_writer(directory)
    # A callable, so the traced step decides from the global step on every call.
    self._record = lambda: tf.equal(global_step % duties.summary_steps, 0)
    self._step = int(global_step.numpy())
    # As CheckpointSaverHook at session creation; it also warms up TF's save path.
    self._manager.save(checkpoint_number=self._step)
    self._last_log = (self._step, time.perf_counter())

  def run(self, steps):
    start, first_step = time.perf_counter(), self._step
    target = min(self._step + steps, self._last_step)
    with self._writer.as_default(step=self._job.global_step), \
        tf.summary.record_if(self._record):
      while self._step < target:
        loss = self._train_step()['loss']
        self._step += 1
        if np.isnan(loss):
          raise tfmon.train.NanLossDuringTrainingError
        if self._step % self._duties.log_steps == 0:
          self._log(float(loss))
        if self._step % self._duties.checkpoint_steps == 0:
          self._manager.save(checkpoint_number=self._step)
    return self._step - first_step, time.perf_counter() - start

  def _log(self, loss):
    now = time.perf_counter()
    steps_per_sec = (self._step - self._last_log[0]) / (now - self._last_log[1])
    self._last_log = (self._step, now)
    logging.info('loss = %s, step = %d', loss, self._step)
    logging.info('global_step/sec: %g', steps_per_sec)
    with tf.summary.record_if(True):
      tf.summary.scalar('global_step/sec', steps_per_sec, step=self._step)

  def close(self):
    if self._step != self._last_step:
      raise RuntimeError(f'{self.name} stopped at {self._step}, not {self._last_step}')
    self._manager.save(checkpoint_number=self._step)  # as CheckpointSaverHook.end
    self._writer.close()
    _require_duties_done(self.name, self.directory, self._duties, self._last_step)


class TfmonSession(_Variant):
  """(b), (c) tfmon's MonitoredTrainingSession with v1's default hooks and
  StopAtStepHook, NanTensorHook and LoggingTensorHook, running `op(step)`."""

  def __init__(self, model_name, directory, last_step, duties, steps_per_loop=None):
    self.name = TFMON if steps_per_loop is None else TFMON_FUSED.format(
        fused=steps_per_loop)
    self.directory = directory
    self._duties = duties
    self._last_step = last_step
    self._job = _EagerJob(model_name)
    self._train_op = tfmon.train.op(self._job.step)
    fusion = {} if steps_per_loop is None else {'steps_per_loop': steps_per_loop}
    try:
      self._session = tfmon.train.MonitoredTrainingSession(
          checkpoint_dir=directory,
          checkpoint={'model': self._job.model, 'optimizer': self._job.optimizer},
          save_checkpoint_steps=duties.checkpoint_steps,
          save_summaries_steps=duties.summary_steps,
          log_step_count_steps=duties.log_steps,
          hooks=[tfmon.train.StopAtStepHook(last_step=last_step),
                 tfmon.train.NanTensorHook('loss'),
                 tfmon.train.LoggingTensorHook({'loss': 'loss'},
                                               every_n_iter=duties.log_steps)],
          **fusion)
    except TypeError as error:
      if 'unexpected keyword argument' in str(error) and 'steps_per_loop' in str(error):
        raise Unavailable('steps_per_loop not available') from error
      raise
    self._steps_per_loop = steps_per_loop or 1
    self._step = int(self._job.global_step.numpy())

  def run(self, steps):
    start, first_step = time.perf_counter(), self._step
    target = self._step + steps
    with self._job.registered():
      while self._step < target and not self._session.should_stop():
        # A run does 1 to steps_per_loop steps (a fused run ends early at a hook's
        # step): this many runs cannot pass the target, and reading the global
        # step only after them keeps reads off the per-run path.
        for _ in range(max(1, (target - self._step) // self._steps_per_loop)):
          if self._session.should_stop():
            break
          self._session.run(self._train_op)
        self._step = int(self._job.global_step.numpy())
    return self._step - first_step, time.perf_counter() - start

  def close(self):
    with self._job.registered():
      stopped = self._session.should_stop()
      self._session.close()
    if not stopped or self._step != self._last_step:
      raise RuntimeError(f'{self.name} at step {self._step} (should_stop: {stopped}), '
                         f'not stopped at {self._last_step}')
    _require_duties_done(self.name, self.directory, self._duties, self._last_step)


class _LogLossAndStepRate(keras.callbacks.Callback):
  """Logs the loss and global_step/sec every N steps, and records global_step/sec,
  as LoggingTensorHook and StepCounterHook do (Keras has no step counter)."""

  def __init__(self, every_n_steps, directory):
    super().__init__()
    self._every_n_steps = every_n_steps
    self._writer = tf.summary.create_file_writer(directory)
    self._steps = 0
    self._last_log = (0, time.perf_counter())

  def on_train_batch_begin(self, batch, logs=None):
    self._begin = batch

  def on_train_batch_end(self, batch, logs=None):
    # One call per execution: `batch` is its last step's index in the epoch.
    steps_before, self._steps = self._steps, self._steps + batch - self._begin + 1
    if self._steps // self._every_n_steps == steps_before // self._every_n_steps:
      return
    now = time.perf_counter()
    steps_per_sec = (self._steps - self._last_log[0]) / (now - self._last_log[1])
    self._last_log = (self._steps, now)
    logging.info('loss = %s, step = %d', logs['loss'], self._steps)
    logging.info('global_step/sec: %g', steps_per_sec)
    with self._writer.as_default():
      tf.summary.scalar('global_step/sec', steps_per_sec, step=self._steps)

  def close(self):
    self._writer.close()


class KerasFit(_Variant):
  """(e) `Model.fit`, one epoch of `steps` steps per round on the same model object
  and callback objects (so fit traces once and the callbacks' step counts carry
  over between rounds)."""

  def __init__(self, model_name, directory, last_step, duties, steps_per_execution,
               callbacks):
    fused = steps_per_execution > 1
    self.name = (KERAS if not fused else KERAS_FUSED if callbacks
                 else KERAS_BARE).format(fused=steps_per_execution)
    self.directory = directory if callbacks else None
    self._duties = duties
    self._last_step = last_step
    self._steps_per_execution = steps_per_execution
    keras.utils.set_random_seed(0)
    self._model = MODELS[model_name].keras_fn()
    # XLA off, as in every other variant ('auto' also picks it off on CPU).
    self._model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=steps_per_execution, jit_compile=False)
    self._dataset = repeated_batch(model_name)
    self._callbacks = []
    if callbacks:
      self._logger = _LogLossAndStepRate(duties.log_steps,
                                         os.path.join(directory, 'steps'))
      self._callbacks = [
          keras.callbacks.ModelCheckpoint(
              os.path.join(directory, 'weights-{epoch:03d}-{batch:06d}.weights.h5'),
              save_weights_only=True, save_freq=duties.checkpoint_steps),
          # TensorBoard counts calls, not steps: one call per execution.
          keras.callbacks.TensorBoard(
              os.path.join(directory, 'tensorboard'),
              update_freq=max(1, duties.summary_steps // steps_per_execution)),
          keras.callbacks.TerminateOnNaN(),
          self._logger,
      ]
    self._epochs = 0

  def run(self, steps):
    if steps % self._steps_per_execution:
      raise ValueError(f'{self.name}: {steps} steps is not a whole number of '
                       f'executions of {self._steps_per_execution}')
    start = time.perf_counter()
    self._model.fit(self._dataset, epochs=self._epochs + 1, initial_epoch=self._epochs,
                    steps_per_epoch=steps, callbacks=self._callbacks, verbose=0,
                    shuffle=False)
    seconds = time.perf_counter() - start
    self._epochs += 1
    if self._model.stop_training:
      raise tfmon.train.NanLossDuringTrainingError
    return steps, seconds

  def close(self):
    steps = int(self._model.optimizer.iterations.numpy())
    if steps != self._last_step:
      raise RuntimeError(f'{self.name} stopped at {steps}, not {self._last_step}')
    if self._callbacks:
      self._logger.close()
      _require_duties_done(self.name, self.directory, self._duties,
                           self._last_step, keras_weights=True)


# --- (d) TF1 in graph mode, in a worker process. ---


class _GraphModeRun:
  """(d) in the worker: the model in its own tf.Graph, trained by TF1's
  MonitoredTrainingSession with the same duties (or a bare MonitoredSession)."""

  def __init__(self, model_name, directory, last_step, duties, hooks):
    self._graph = tf.Graph()
    self._last_step = last_step
    self._step = 0
    v1 = tf.compat.v1
    with self._graph.as_default():
      global_step = v1.train.get_or_create_global_step()
      batches = v1.data.make_one_shot_iterator(repeated_batch(model_name))
      images, labels = batches.get_next()  # in the graph, as next() in the TF2 steps
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=labels, logits=MODELS[model_name].graph_fn(images)))
      v1.summary.scalar('loss', loss)
      self._train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
          loss, global_step=global_step)
      if hooks:
        self._session = v1.train.MonitoredTrainingSession(
            checkpoint_dir=directory,
            save_checkpoint_steps=duties['checkpoint_steps'],
            save_summaries_steps=duties['summary_steps'],
            log_step_count_steps=duties['log_steps'],
            hooks=[v1.train.StopAtStepHook(last_step=last_step),
                   v1.train.NanTensorHook(loss),
                   v1.train.LoggingTensorHook({'loss': loss},
                                              every_n_iter=duties['log_steps'])])
      else:
        self._session = v1.train.MonitoredSession()

  def run(self, steps):
    start, first_step = time.perf_counter(), self._step
    target = self._step + steps
    with self._graph.as_default():
      while self._step < target and not self._session.should_stop():
        self._session.run(self._train_op)
        self._step += 1
    return self._step - first_step, time.perf_counter() - start

  def close(self, hooks):
    with self._graph.as_default():
      stopped = self._session.should_stop()
      self._session.close()
    if self._step != self._last_step or (hooks and not stopped):
      raise RuntimeError(f'stopped at step {self._step} (should_stop: {stopped}), '
                         f'not at {self._last_step}')


def _graph_mode_worker():
  """Serves (d): one JSON request a line on stdin, one JSON reply a line.

  Requests: {"command": "start", "model", "directory", "last_step", "duties"},
  {"command": "run", "variant", "steps"} -> {"steps", "seconds"}, {"command": "close"}.
  """
  replies = os.fdopen(os.dup(1), 'w', buffering=1)
  os.dup2(2, 1)  # anything else printed goes to stderr, not into the replies
  tf.compat.v1.disable_eager_execution()
  runs = {}
  for line in sys.stdin:
    request = json.loads(line)
    try:
      if request['command'] == 'start':
        for name, hooks in ((TF1, True), (TF1_BARE, False)):
          runs[name] = _GraphModeRun(request['model'], request['directory'],
                                     request['last_step'], request['duties'], hooks)
        reply = {}
      elif request['command'] == 'run':
        steps, seconds = runs[request['variant']].run(request['steps'])
        reply = {'steps': steps, 'seconds': seconds}
      else:
        for name, run in runs.items():
          run.close(hooks=name == TF1)
        reply = {}
    except Exception:  # pylint: disable=broad-except
      reply = {'error': traceback.format_exc()}
    replies.write(json.dumps(reply) + '\n')
    if request['command'] == 'close' or 'error' in reply:
      return


class GraphModeWorker:
  """The parent's end of a graph-mode worker process: starts it, sends it
  requests, and turns a failure there into an exception here."""

  def __init__(self, model_name, directory, last_step, duties):
    self.directory = directory
    self._stderr = tempfile.TemporaryFile(mode='w+')
    self._process = subprocess.Popen(
        [sys.executable, '-m', 'benchmarks.compare', _WORKER_FLAG],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
        text=True, bufsize=1, cwd=_REPO_ROOT)
    self._request(command='start', model=model_name, directory=directory,
                  last_step=last_step, duties=dataclasses.asdict(duties))
    self._duties = duties
    self._last_step = last_step

  def _request(self, **request):
    self._process.stdin.write(json.dumps(request) + '\n')
    self._process.stdin.flush()
    line = self._process.stdout.readline()
    reply = json.loads(line) if line else {'error': 'the worker exited'}
    if 'error' in reply:
      self._stderr.seek(0)
      stderr = self._stderr.read()[-3000:]
      self.kill()
      raise RuntimeError(f'graph-mode worker: {reply["error"]}\n'
                         f'its stderr ends with:\n{stderr}')
    return reply

  def variants(self):
    return [_RemoteVariant(self, TF1, self.directory), _RemoteVariant(self, TF1_BARE)]

  def run(self, variant, steps):
    reply = self._request(command='run', variant=variant, steps=steps)
    return reply['steps'], reply['seconds']

  def close(self):
    self._request(command='close')
    self._process.wait()
    _require_duties_done(TF1, self.directory, self._duties, self._last_step)

  def kill(self):
    """Ends the worker if it still runs (after an error here or there)."""
    if self._process.poll() is None:
      self._process.kill()
      self._process.wait()
    self._stderr.close()


class _RemoteVariant(_Variant):
  """A variant that runs in the graph-mode worker (which it closes with the other)."""

  def __init__(self, worker, name, directory=None):
    self._worker = worker
    self.name = name
    self.directory = directory

  def run(self, steps):
    return self._worker.run(self.name, steps)


# --- Measuring. ---


@dataclasses.dataclass
class Result:
  """One variant's rates (steps/sec, one per round), its ratios to (a) in the same
  rounds, and where it wrote; or why it did not run."""
  name: str
  rates: list = dataclasses.field(default_factory=list)
  ratios: list = dataclasses.field(default_factory=list)
  directory: str = None
  unavailable: str = None


def _variants(model_name, directory, last_step, duties, stack):
  """Builds every variant; returns them, and Results for those that cannot run."""
  def subdirectory(name):
    path = os.path.join(directory, name)
    os.makedirs(path)
    return path

  worker = GraphModeWorker(model_name, subdirectory('tf1'), last_step, duties)
  stack.callback(worker.kill)
  variants = [PlainLoop(model_name, subdirectory('plain'), last_step, duties),
              TfmonSession(model_name, subdirectory('tfmon'), last_step, duties)]
  unavailable = []
  try:
    variants.append(TfmonSession(model_name, subdirectory('tfmon_fused'), last_step,
                                 duties, steps_per_loop=duties.fused_steps))
  except Unavailable as reason:
    unavailable.append(Result(TFMON_FUSED.format(fused=duties.fused_steps),
                              unavailable=str(reason)))
  variants += worker.variants()
  variants += [
      KerasFit(model_name, subdirectory('keras'), last_step, duties, 1, callbacks=True),
      KerasFit(model_name, subdirectory('keras_fused'), last_step, duties,
               duties.fused_steps, callbacks=True),
      KerasFit(model_name, None, last_step, duties, duties.fused_steps, callbacks=False),
  ]
  return variants, worker, unavailable


def measure(model_name, rounds, steps, warmup_steps, directory, duties=Duties()):
  """Runs every variant for warm-up + rounds x steps steps, timing the rounds.

  Args:
    model_name: 'mlp' or 'cnn'.
    rounds: Interleaved rounds timed.
    steps: Steps per variant per round (a multiple of `duties.fused_steps`).
    warmup_steps: Untimed steps first (tracing); a multiple of `duties.fused_steps`.
    directory: An empty directory; each variant writes under its own subdirectory.
    duties: How often the variants checkpoint, record summaries and log.

  Returns:
    A list of `Result`s, in the table's order, (a) first.

  Raises:
    RuntimeError: a variant failed, did not stop at its last step, or did not
      checkpoint or record summaries.
  """
  for count, what in ((steps, '--steps'), (warmup_steps, 'warm-up steps')):
    if count <= 0 or count % duties.fused_steps:
      raise ValueError(f'{what} must be a positive multiple of {duties.fused_steps}, '
                       f'the fused variants\' steps per call; got {count}')
  last_step = warmup_steps + rounds * steps
  fused = duties.fused_steps
  # The order each round starts from (then rotated): each pair that a target
  # compares runs side by side, so their same-round ratio spans seconds of the
  # machine's drift, not a whole round's.
  run_order = [KERAS_BARE.format(fused=fused), TFMON_FUSED.format(fused=fused), PLAIN,
               TFMON, TF1, TF1_BARE, KERAS, KERAS_FUSED.format(fused=fused)]
  with contextlib.ExitStack() as stack:
    variants, worker, unavailable = _variants(model_name, directory, last_step, duties,
                                              stack)
    variants.sort(key=lambda variant: run_order.index(variant.name))
    for variant in variants:
      variant.run(warmup_steps)
    rates = collections.defaultdict(list)
    with overhead.long_lived_objects_frozen():
      for round_index in range(rounds):
        # Rotate the order so that no variant always runs first (or after another).
        shift = round_index % len(variants)
        for variant in variants[shift:] + variants[:shift]:
          steps_run, seconds = variant.run(steps)
          rates[variant.name].append(steps_run / seconds)
    for variant in variants:
      variant.close()
    worker.close()
  baseline = rates[PLAIN]
  results = [Result(v.name, rates[v.name],
                    [rate / base for rate, base in zip(rates[v.name], baseline)],
                    v.directory) for v in variants]
  results += unavailable
  order = [PLAIN, TFMON, TFMON_FUSED.format(fused=duties.fused_steps), TF1, TF1_BARE,
           KERAS, KERAS_FUSED.format(fused=duties.fused_steps),
           KERAS_BARE.format(fused=duties.fused_steps)]
  return sorted(results, key=lambda result: order.index(result.name))


def _print_table(model_name, rounds, steps, warmup_steps, results, duties=Duties()):
  print(f'{model_name}: {rounds} interleaved rounds of {steps} steps after '
        f'{warmup_steps} warm-up steps; median steps/sec, median same-round ratio '
        'to (a) and its range')
  if warmup_steps + rounds * steps < duties.checkpoint_steps:
    print(f'  (the runs end before step {duties.checkpoint_steps}: no timed checkpoint '
          'in these rounds)')
  for result in results:
    if result.unavailable:
      print(f'  {result.name:56s} n/a ({result.unavailable})')
    else:
      print(f'  {result.name:56s} {statistics.median(result.rates):9.1f} steps/s  '
            f'{statistics.median(result.ratios):6.3f}x (a)  '
            f'(rounds: {min(result.ratios):.3f} to {max(result.ratios):.3f})')
  print("  issue 6's targets, as the median of same-round ratios:")
  for target in targets(model_name, results, duties):
    print(f'    {target}')
  sys.stdout.flush()


def _same_round_ratio(results, name, baseline):
  """Median over rounds of `name`'s rate over `baseline`'s in the same round."""
  by_name = {result.name: result for result in results if not result.unavailable}
  if name not in by_name or baseline not in by_name:
    return None
  return statistics.median(
      rate / base for rate, base in zip(by_name[name].rates, by_name[baseline].rates))


def targets(model_name, results, duties=Duties()):
  """Issue 6's speed targets for `results` of `model_name`, one line each.

  Tiny MLP: (b) at least TF1's MonitoredTrainingSession, (c) at least Keras fit
  at the same steps_per_execution with no callbacks. CNN: (b) at least 0.98x and
  (c) at least 1.0x the plain loop.
  """
  fused = TFMON_FUSED.format(fused=duties.fused_steps)
  pairs = {
      'mlp': [(TFMON, TF1, 1.0),
              (fused, KERAS_BARE.format(fused=duties.fused_steps), 1.0)],
      'cnn': [(TFMON, PLAIN, 0.98), (fused, PLAIN, 1.0)],
  }[model_name]
  lines = []
  for name, baseline, needed in pairs:
    ratio = _same_round_ratio(results, name, baseline)
    if ratio is not None:
      verdict = 'met' if ratio >= needed else 'NOT met'
      lines.append(f'{name[:3]} / {baseline[:3]} = {ratio:.3f} (target >= {needed}): '
                   f'{verdict}')
  return lines


def _print_idle_hooks_target():
  """Issue 6's last target, cost growth, measured as `python -m benchmarks.overhead
  --model mlp` does (its own variants: tfmon alone, without duties)."""
  model_fn, rounds, steps = overhead.MODELS['mlp']
  absl_verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.WARNING)  # 51 hooks' log lines are not the point
  try:
    _, (idle_ratio, growth) = overhead.measure(model_fn, rounds, steps)
  finally:
    logging.set_verbosity(absl_verbosity)
  print(f'  and benchmarks.overhead\'s {rounds} rounds of {steps} steps: '
        f'{overhead.idle_hooks_line(idle_ratio, growth)}')
  sys.stdout.flush()


def main():
  if sys.argv[1:] == [_WORKER_FLAG]:
    _graph_mode_worker()
    return
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--model', choices=['mlp', 'cnn', 'both'], default='both')
  parser.add_argument('--rounds', type=int, default=0,
                      help='interleaved rounds (default: %s)' % ', '.join(
                          f'{m.default_rounds} for {n}' for n, m in MODELS.items()))
  parser.add_argument('--steps', type=int, default=0,
                      help='steps per round, a multiple of 100 (default: %s)' % ', '.join(
                          f'{m.default_steps} for {n}' for n, m in MODELS.items()))
  args = parser.parse_args()
  for model_name in ['mlp', 'cnn'] if args.model == 'both' else [args.model]:
    model = MODELS[model_name]
    rounds = args.rounds or model.default_rounds
    steps = args.steps or model.default_steps
    with tempfile.TemporaryDirectory(prefix='tfmon_compare_') as directory:
      results = measure(model_name, rounds, steps, model.warmup_steps, directory)
    _print_table(model_name, rounds, steps, model.warmup_steps, results)
    if model_name == 'mlp':
      _print_idle_hooks_target()
  print('(d) runs in a graph-mode worker process, taking its turn in each round\'s '
        'rotated order while this process waits.')


if __name__ == '__main__':
  main()
