r"""The TF1 CIFAR-10 tutorial's training script (cifar10_train.py), ported to tfmon.

The model is the tutorial's CNN (two 5x5 conv + max-pool + local response norm
blocks, dense 384 and 192, weight decay on the dense layers) trained on random
24x24 crops. As in the tutorial it runs under MonitoredTrainingSession with
`checkpoint_dir`, `StopAtStepHook(last_step=max_steps)`, `NanTensorHook(loss)` and
its `_LoggerHook`, and writes its summaries with its `tf.compat.v1.summary` calls;
it adds an `EvaluationHook` on the test split. Running it again resumes from the
last checkpoint.

Data: the real CIFAR-10 from --data_dir (binary or python format), or from
Keras' dataset cache; with neither, an embedded synthetic CIFAR-shaped dataset,
announced in the log. The program never needs the network.

Multi-worker training: `--workers N` trains on N local processes under
`tf.distribute.MultiWorkerMirroredStrategy`. This process then only launches
them (`tfmon.examples.launch`): each runs this module with the same flags minus
--workers, with its `TF_CONFIG`, and their log lines come out prefixed by
`[worker i] `; the exit code is the workers'. A process started with `TF_CONFIG`
(by this launcher or any other) is a worker: it trains on its shard of the
training data, --batch_size stays the global batch (each worker takes
batch_size / N per step), every worker evaluates on its own, and the chief,
worker 0, writes the checkpoints and TensorBoard logs into --train_dir, from
which a rerun resumes. The default --train_dir is /tmp/cifar10_train in one
process and /tmp/cifar10_train_workers for multi-worker training, so that
neither job resumes the other's checkpoints. Once done, the workers exit
together (`leave_cluster`).

The flags are checked before this module imports TensorFlow; a bad one is
answered with one line naming it and what to give.

  python -m tfmon.examples.cifar10 [--train_dir=DIR] [--data_dir=DIR]
      [--max_steps=500] [--batch_size=64] [--log_frequency=50] [--workers=N]
  tensorboard --logdir DIR
"""

import math
import os
import socket
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging

from tfmon.examples import cifar10_files
from tfmon.examples import launch

# The flags, and what needs nothing else, come before TensorFlow's import, which
# takes seconds: `--help`, a bad flag and the process that only launches the
# workers (--workers) need not wait for it (see the end of this block).


def default_train_dir(multi_worker):
  """--train_dir's default: one for single-process jobs, one for multi-worker ones."""
  name = 'cifar10_train_workers' if multi_worker else 'cifar10_train'
  return os.path.join(tempfile.gettempdir(), name)


_TRAIN_DIR = flags.DEFINE_string(
    'train_dir', None, 'Directory where to write event logs and checkpoints '
    '(created if missing; a rerun resumes from it). Default: '
    f'{default_train_dir(multi_worker=False)} in one process, '
    f'{default_train_dir(multi_worker=True)} for multi-worker training, so that '
    'neither job resumes the other\'s checkpoints.')
_DATA_DIR = flags.DEFINE_string(
    'data_dir', None, 'Directory with the CIFAR-10 files (binary or python '
    'format); default: Keras\' dataset cache, else synthetic data.')
_MAX_STEPS = flags.DEFINE_integer(
    'max_steps', 500, 'The global step to stop at (StopAtStepHook last_step): a '
    'resumed job trains until its global step reaches it.', lower_bound=0)
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 64, 'Number of images per batch.',
                                   lower_bound=1)
_LOG_FREQUENCY = flags.DEFINE_integer('log_frequency', 50,
                                      'How often to log results to the console.',
                                      lower_bound=1)
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 250,
                                   'Evaluate on the test split every N steps.',
                                   lower_bound=1)
_EVAL_EXAMPLES = flags.DEFINE_integer('eval_examples', 1000,
                                      'Test examples per evaluation (0: all).',
                                      lower_bound=0)
_LEARNING_RATE = flags.DEFINE_float('learning_rate', 0.05, 'SGD learning rate (> 0).')
_WORKERS = flags.DEFINE_integer(
    'workers', None, 'Train on N local worker processes (MultiWorkerMirroredStrategy, '
    'started by tfmon.examples.launch); --batch_size is the global batch.',
    lower_bound=1)
flags.register_validator(
    'train_dir', lambda path: not path or not os.path.exists(path) or os.path.isdir(path),
    message='--train_dir names a file: give a directory (created if missing).')
flags.register_validator(
    'learning_rate', lambda rate: math.isfinite(rate) and rate > 0,
    message='--learning_rate is the SGD step size: give a number > 0, such as the '
    'default 0.05 (a negative one climbs the loss instead of descending it).')
flags.register_multi_flags_validator(
    ['batch_size', 'workers'],
    lambda values: (not values['workers'] or
                    values['batch_size'] % values['workers'] == 0),
    message='--batch_size is the global batch, split evenly over --workers: give a '
    'multiple of the number of workers.')


def _check_data_dir(path):
  if path:
    try:
      cifar10_files.find(path)  # are the files there? Reading them comes later
    except cifar10_files.DataError as e:
      raise flags.ValidationError(str(e)) from None
  return True


flags.register_validator('data_dir', _check_data_dir)


def _parse_flags(argv):
  """Parses the command line; a bad flag ends the program with one line naming it."""
  app.define_help_flags()  # --help, --helpshort, --helpfull, as app.run defines them
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    sys.exit('cifar10: ' + ' '.join(str(e).split()))


def _worker_command(train_dir):
  """A worker's command line: this module with the flags given, minus --workers,
  and `train_dir`, so that every worker trains in the same directory."""
  given = [f'--train_dir={train_dir}']
  for name in flags.FLAGS:
    flag = flags.FLAGS[name]
    if (flag.present and name == flag.name  # not a short name
        and name not in ('workers', 'train_dir')):
      given.append(flag.serialize())
  return [sys.executable, '-m', 'tfmon.examples.cifar10', *given]


def _launch_workers(argv):
  """This process only launches the workers, and exits with their exit code."""
  del argv
  logging.set_verbosity(logging.INFO)
  command = _worker_command(_TRAIN_DIR.value or default_train_dir(multi_worker=True))
  logging.info('Launching %d workers: %s', _WORKERS.value, ' '.join(command))
  return launch.launch(command, _WORKERS.value)


if __name__ == '__main__':
  _ARGV = _parse_flags(sys.argv)
  if _WORKERS.value is not None:
    app.run(_launch_workers, flags_parser=lambda _: _ARGV)  # exits

# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import tensorflow as tf

import tfmon
from tfmon import tf_internals  # the workers' barrier at exit
from tfmon import workers as tfmon_workers
from tfmon.examples import cifar10_input
# pylint: enable=g-import-not-at-top,wrong-import-position

_WEIGHT_DECAY = 0.004  # the tutorial's wd on local3 and local4


def _local_response_norm(x):
  return tf.nn.local_response_normalization(x, 4, bias=1.0, alpha=0.001 / 9.0,
                                            beta=0.75)


def inference():
  """The tutorial's CNN as a Keras model, from 24x24x3 images to 10 logits."""
  dense = lambda units, name: keras.layers.Dense(  # pylint: disable=g-long-lambda
      units, activation='relu', name=name,
      kernel_regularizer=keras.regularizers.L2(_WEIGHT_DECAY / 2))  # wd * l2_loss
  size = cifar10_input.CROP_SIZE
  return keras.Sequential([
      keras.Input((size, size, 3)),
      keras.layers.Conv2D(64, 5, padding='same', activation='relu', name='conv1'),
      keras.layers.MaxPooling2D(3, 2, padding='same', name='pool1'),
      keras.layers.Lambda(_local_response_norm, name='norm1'),
      keras.layers.Conv2D(64, 5, padding='same', activation='relu', name='conv2'),
      keras.layers.Lambda(_local_response_norm, name='norm2'),
      keras.layers.MaxPooling2D(3, 2, padding='same', name='pool2'),
      keras.layers.Flatten(),
      dense(384, 'local3'),
      dense(192, 'local4'),
      keras.layers.Dense(cifar10_input.NUM_CLASSES, name='softmax_linear'),
  ], name='cifar10')


_SUMMARIZED = ('conv1', 'conv2', 'local3', 'local4', 'softmax_linear')


def _logits_and_activations(model, images):
  """`model`'s logits for a training step, and the outputs the tutorial summarized."""
  activations = {}
  x = images
  for layer in model.layers:  # as the model calls them
    x = layer(x, training=True)
    if layer.name in _SUMMARIZED:
      activations[layer.name] = x
  return x, activations


def _summaries(cross_entropy, loss, learning_rate, images, activations):
  """The tutorial's summaries, with its v1 calls.

  Written as TF1 wrote them: scalars as `simple_value`s, which TF1-era readers
  of event files see (`EventAccumulator.Scalars`, `summary_iterator` loops);
  `tf.summary.scalar` writes tensor summaries, which they do not. tfmon
  computes them on the SummarySaverHook's recording steps only.
  """
  tf.compat.v1.summary.scalar('cross_entropy', cross_entropy)
  tf.compat.v1.summary.scalar('total_loss', loss)
  tf.compat.v1.summary.scalar('learning_rate', learning_rate)
  tf.compat.v1.summary.image('images', images)  # the first 3, rescaled to 0-255
  for name, x in activations.items():
    tf.compat.v1.summary.histogram(name + '/activations', x)
    tf.compat.v1.summary.scalar(name + '/sparsity', tf.math.zero_fraction(x))


class _LoggerHook(tfmon.train.SessionRunHook):
  """The tutorial's logger: loss, examples/sec and sec/batch every N steps.

  Unlike the tutorial it fetches the loss only on the steps it logs, so the
  others pay nothing for it.
  """

  def __init__(self, log_frequency, batch_size):
    self._log_frequency = log_frequency
    self._batch_size = batch_size

  def begin(self):
    self._start_time = time.time()
    self._runs = 0

  def before_run(self, run_context):
    self._runs += 1
    if self._runs % self._log_frequency:
      return None
    return tfmon.train.SessionRunArgs(
        {'loss': 'loss', 'step': tfmon.train.get_global_step()})

  def after_run(self, run_context, run_values):
    if run_values.results is None:
      return
    current_time = time.time()
    duration = current_time - self._start_time
    self._start_time = current_time
    examples_per_sec = self._log_frequency * self._batch_size / duration
    sec_per_batch = duration / self._log_frequency
    logging.info('step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch)',
                 run_values.results['step'] + 1, run_values.results['loss'],
                 examples_per_sec, sec_per_batch)


def multi_worker_strategy():
  """A MultiWorkerMirroredStrategy if `TF_CONFIG` makes this process a worker.

  Call it before any other TensorFlow work: the strategy configures TensorFlow's
  runtime for collective ops, which is only possible before it starts.

  Returns:
    The strategy, or None without `TF_CONFIG` (training in this process alone).
  """
  if not os.environ.get('TF_CONFIG'):
    return None
  return tf.distribute.MultiWorkerMirroredStrategy()


def _worker_datasets(data, batch_size, strategy):
  """Each replica's training batches: its worker's shard, its part of the batch."""

  def dataset_fn(context):  # one call per worker, with the worker's place in it
    return cifar10_input.train_dataset(
        data, context.get_per_replica_batch_size(batch_size),
        num_shards=context.num_input_pipelines, shard_index=context.input_pipeline_id)

  return strategy.distribute_datasets_from_function(dataset_fn)


def train(train_dir, data_dir=None, max_steps=500, batch_size=64, log_frequency=50,
          eval_every=250, eval_examples=1000, learning_rate=0.05, strategy=None):
  """Trains the CIFAR-10 model until global step `max_steps`.

  Args:
    strategy: A `tf.distribute.Strategy` to train under, such as
      `multi_worker_strategy()`'s; None trains in this process alone.
      `batch_size` is the global batch, split over the strategy's replicas.

  Returns:
    A dict with the final global step, the steps trained by this run, its
    duration and the latest evaluation results.
  """
  data = cifar10_input.load(data_dir)
  logging.info('Data: %s (%d train, %d test images).', data.source,
               len(data.train[1]), len(data.test[1]))
  keras.utils.set_random_seed(0)
  # TF's default strategy for one process: its run, reduce and dataset calls
  # return what they are given, so the step is the plain one.
  if strategy is None:
    strategy = tf.distribute.get_strategy()
  with strategy.scope():  # mirrored; every worker makes the same ones in the same order
    global_step = tfmon.train.get_or_create_global_step()
    model = inference()
    optimizer = keras.optimizers.SGD(learning_rate)
    optimizer.build(model.trainable_variables)  # so a restore fills its state at once
  # Per example, reduced below: under a strategy of N replicas, Keras' own mean
  # divides by N once more (for its fit's summing of the replicas' losses).
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                       reduction=None)
  batches = iter(_worker_datasets(data, batch_size, strategy))

  def replica_step(images, labels):
    # Scaled so that the replicas' gradients, summed by the optimizer, are
    # those of the global batch's mean loss.
    with tf.GradientTape() as tape:
      logits, activations = _logits_and_activations(model, images)
      cross_entropy = tf.nn.compute_average_loss(
          loss_fn(labels, logits), global_batch_size=batch_size)
      loss = cross_entropy + tf.nn.scale_regularization_loss(  # plus weight decay
          tf.add_n(model.losses))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return cross_entropy, loss, activations

  def train_op():
    images, labels = next(batches)
    cross_entropy, loss, activations = strategy.run(replica_step, args=(images, labels))
    cross_entropy, loss = (strategy.reduce('SUM', value, axis=None)
                           for value in (cross_entropy, loss))
    global_step.assign_add(1)
    # In cross-replica context, on this worker's first replica's values: one
    # set of summaries a step, whatever the number of replicas.
    first_replica = lambda value: strategy.experimental_local_results(value)[0]
    _summaries(cross_entropy, loss, optimizer.learning_rate, first_replica(images),
               {name: first_replica(x) for name, x in activations.items()})
    return {'loss': loss}

  # Outside the strategy's scope, so that each worker evaluates on its own with
  # no collective op: every worker has the same weights, hence the same results.
  accuracy = keras.metrics.SparseCategoricalAccuracy(name='accuracy')

  def eval_step(images, labels):
    logits = model(images, training=False)
    accuracy.update_state(labels, logits)
    return {'loss': tf.reduce_mean(loss_fn(labels, logits))}

  evaluation = tfmon.train.EvaluationHook(
      eval_step, cifar10_input.eval_dataset(data, 256, eval_examples or None),
      every_n_steps=eval_every, metrics=[accuracy],
      # The chief's event files only.
      summary_dir=train_dir if strategy.extended.should_save_summary else None)
  hooks = [tfmon.train.StopAtStepHook(last_step=max_steps),
           tfmon.train.NanTensorHook('loss'),
           _LoggerHook(log_frequency, batch_size),
           evaluation]
  start_time = time.time()
  start_step = None
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=train_dir,
      checkpoint={'model': model, 'optimizer': optimizer},
      save_checkpoint_steps=max(max_steps // 4, 1),
      save_summaries_steps=log_frequency,
      log_step_count_steps=log_frequency,
      hooks=hooks,
      strategy=strategy) as sess:  # a worker's role comes from its TF_CONFIG
    start_step = int(global_step.numpy())
    if start_step:
      logging.info('Resuming from global step %d (checkpoint in %s).', start_step,
                   train_dir)
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_op))
  final_step = int(global_step.numpy())
  summary = {'global_step': final_step, 'steps_this_run': final_step - start_step,
             'seconds': time.time() - start_time,
             'eval': dict(evaluation.latest_results or {})}
  logging.info(
      'Trained %d steps (global step %d -> %d) in %.1f s; test %s. Checkpoints and '
      'TensorBoard logs are in %s: view them with tensorboard --logdir %s',
      summary['steps_this_run'], start_step, final_step, summary['seconds'],
      tfmon.hooks.evaluation.dict_to_str(summary['eval']) or 'not evaluated',
      train_dir, train_dir)
  return summary


# Workers stop after the same step and finish moments apart: far longer means
# one of them failed.
_EXIT_BARRIER_MS = 120_000
_GONE_WAIT_SECS = 5.0


def leave_cluster(strategy, code):
  """Ends this worker's process with `code` at the same time as the others.

  TensorFlow's coordination service, which the chief hosts, takes a worker
  gone before the others for a crash and logs an error (`StartAbort
  UNAVAILABLE ... The tasks have crashed`; `Failed to send RPC to coordination
  service` in a worker whose chief went first), and Python's teardown of a
  worker waits for seconds (up to a minute seen) on tf.data and RPC threads.
  So the workers meet at a barrier once done and exit at once, skipping that
  teardown (what they wrote is on disk: the session's end flushed it), the
  chief last, once the others' servers are gone, so that no heartbeat of
  theirs finds it gone.

  Args:
    strategy: This worker's MultiWorkerMirroredStrategy.
    code: The exit code, or a message to print and exit with 1.
  """
  try:
    tf_internals.wait_at_barrier('tfmon.examples.cifar10 exit', _EXIT_BARRIER_MS)
  except tf.errors.OpError as e:  # the launcher handles a failed worker
    logging.warning('Not every worker finished (%s); exiting anyway.',
                    ' '.join(str(e).split()))
  if tfmon_workers.is_chief(strategy):
    cluster = strategy.cluster_resolver.cluster_spec().as_dict()
    mine = cluster[strategy.cluster_resolver.task_type][strategy.cluster_resolver.task_id]
    _wait_until_gone([address for tasks in cluster.values() for address in tasks
                      if address != mine])
  if isinstance(code, str):
    print(code, file=sys.stderr)
    code = 1
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code or 0)


def _wait_until_gone(addresses):
  """Waits (a few seconds at most) until no server listens at `addresses`."""
  deadline = time.monotonic() + _GONE_WAIT_SECS
  for address in addresses:
    host, port = address.rsplit(':', 1)
    while time.monotonic() < deadline:
      try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
      except OSError:  # refused: that worker's process has exited
        break
      time.sleep(0.02)


def _log_tensorflow_lines_once():
  """Leaves TensorFlow's log lines to the root logger's handler, absl's.

  TensorFlow gave its logger a handler of its own when it loaded, the root
  logger having none then; absl.app has put one on the root since, so each line
  TensorFlow logs itself (the strategy's) would print twice.
  """
  tf_logger = tf.get_logger()
  for handler in tf_logger.handlers[:]:
    tf_logger.removeHandler(handler)


def main(argv):
  del argv
  logging.set_verbosity(logging.INFO)
  _log_tensorflow_lines_once()
  strategy = multi_worker_strategy()  # before any other TensorFlow work
  train_dir = _TRAIN_DIR.value or default_train_dir(multi_worker=strategy is not None)
  code = 0
  try:
    train(train_dir, _DATA_DIR.value, _MAX_STEPS.value, _BATCH_SIZE.value,
          _LOG_FREQUENCY.value, _EVAL_EVERY.value, _EVAL_EXAMPLES.value,
          _LEARNING_RATE.value, strategy)
  except cifar10_input.DataError as e:  # found before training: the user's to fix
    code = f'cifar10: {e}'  # one line, no traceback
  except SystemExit as e:  # a stop signal: every worker stopped after the same step
    if strategy is None:
      raise
    code = e.code
  if strategy is not None:
    leave_cluster(strategy, code)
  sys.exit(code)


if __name__ == '__main__':
  app.run(main, flags_parser=lambda _: _ARGV)
