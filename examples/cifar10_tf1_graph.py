r"""TensorFlow's TF1 CIFAR-10 tutorial (cifar10.py, cifar10_input.py, cifar10_train.py).

The model, loss and train functions below are the tutorial's own graph code
(`tensorflow/models/tutorials/image/cifar10`, TF1): `tf.compat.v1.get_variable`
on the CPU, weight decay through the 'losses' collection, moving averages of the
losses and of the variables, an exponentially decaying learning rate, and the
activation, gradient and variable summaries; its input is the tutorial's
queue-runner reader: `string_input_producer`, `FixedLengthRecordReader`, the
distortions, `shuffle_batch` with 16 threads, started by the session.
`--graph tf1` runs it as TF1 did, in TF1's graph mode (still in TF 2.21);
`--graph tfmon` runs the very same code through tfmon. The port is the two
names in `main`:

    tf.Graph                              -> tfmon.Graph
    tf.compat.v1.train.MonitoredTrainingSession -> tfmon.train.MonitoredTrainingSession

Without `--data_dir`, synthetic files in CIFAR-10's binary format stand in for
the data. `--input dataset` reads fixed batches through tf.data instead, so that
two runs see the same batches (16 queue threads do not).

`--workers N` trains on N local worker processes under
MultiWorkerMirroredStrategy: the same graph code, built once per worker by
`tfmon.train.capture_graph(build, strategy=...)`, each worker on batches of
128 from its own queue runners; the chief checkpoints. (TF1 trained on
several processes through parameter servers, which tfmon does not run.)

  python examples/cifar10_tf1_graph.py --graph tfmon --train_dir /tmp/cifar10_graph \
      --examples_per_epoch 1000
  python examples/cifar10_tf1_graph.py --workers 2 --train_dir /tmp/cifar10_graph_workers
"""

import os
import re
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import tfmon
from tfmon.examples import cifar10_input
from tfmon.examples import launch

_GRAPH = flags.DEFINE_enum('graph', 'tfmon', ['tfmon', 'tf1'],
                           'Run under tfmon.Graph or TF1 graph mode.')
_TRAIN_DIR = flags.DEFINE_string('train_dir', '/tmp/cifar10_tf1_graph',
                                 'Where checkpoints and summaries go.')
_MAX_STEPS = flags.DEFINE_integer('max_steps', 100, 'Global step to stop at.')
_SAVE_STEPS = flags.DEFINE_integer('save_steps', 50, 'Checkpoint every N steps.')
_LOG_FREQUENCY = flags.DEFINE_integer('log_frequency', 10, 'Log every N steps.')
_SEED = flags.DEFINE_integer('seed', None, 'The graph-level random seed, if any.')
_INPUT = flags.DEFINE_enum(
    'input', 'queues', ['queues', 'dataset'],
    "The tutorial's queue-runner input, or a tf.data pipeline of fixed batches.")
_DATA_DIR = flags.DEFINE_string(
    'data_dir', None, "The tutorial's binary files (cifar-10-batches-bin); "
    'default: synthetic ones in that format.')
_WORKERS = flags.DEFINE_integer(
    'workers', None, 'Train on N local worker processes under '
    'MultiWorkerMirroredStrategy (--graph tfmon), each on batches of 128: this '
    'process launches them (tfmon.examples.launch).', lower_bound=1)
_EXAMPLES_PER_EPOCH = flags.DEFINE_integer(
    'examples_per_epoch', 50000, 'Training examples per epoch (the shuffle '
    'queue holds 40% of them before the first batch).')

BATCH_SIZE = 128
IMAGE_SIZE = 24
NUM_CLASSES = 10
NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN = 50000
MOVING_AVERAGE_DECAY = 0.9999
NUM_EPOCHS_PER_DECAY = 350.0
LEARNING_RATE_DECAY_FACTOR = 0.1
INITIAL_LEARNING_RATE = 0.1
TOWER_NAME = 'tower'

v1 = tf.compat.v1


# ---- cifar10.py, as the tutorial wrote it (tf.* names spelled tf.compat.v1.*) ----

def _activation_summary(x):
  tensor_name = re.sub('%s_[0-9]*/' % TOWER_NAME, '', x.op.name)
  v1.summary.histogram(tensor_name + '/activations', x)
  v1.summary.scalar(tensor_name + '/sparsity', tf.nn.zero_fraction(x))


def _variable_on_cpu(name, shape, initializer):
  with tf.device('/cpu:0'):
    var = v1.get_variable(name, shape, initializer=initializer, dtype=tf.float32)
  return var


def _variable_with_weight_decay(name, shape, stddev, wd):
  var = _variable_on_cpu(
      name, shape, v1.truncated_normal_initializer(stddev=stddev, dtype=tf.float32))
  if wd is not None:
    weight_decay = tf.multiply(tf.nn.l2_loss(var), wd, name='weight_loss')
    v1.add_to_collection('losses', weight_decay)
  return var


def inference(images):
  with v1.variable_scope('conv1') as scope:
    kernel = _variable_with_weight_decay('weights', shape=[5, 5, 3, 64],
                                         stddev=5e-2, wd=None)
    conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding='SAME')
    biases = _variable_on_cpu('biases', [64], v1.constant_initializer(0.0))
    pre_activation = tf.nn.bias_add(conv, biases)
    conv1 = tf.nn.relu(pre_activation, name=scope.name)
    _activation_summary(conv1)
  pool1 = tf.nn.max_pool2d(conv1, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                           padding='SAME', name='pool1')
  norm1 = tf.nn.lrn(pool1, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm1')
  with v1.variable_scope('conv2') as scope:
    kernel = _variable_with_weight_decay('weights', shape=[5, 5, 64, 64],
                                         stddev=5e-2, wd=None)
    conv = tf.nn.conv2d(norm1, kernel, [1, 1, 1, 1], padding='SAME')
    biases = _variable_on_cpu('biases', [64], v1.constant_initializer(0.1))
    pre_activation = tf.nn.bias_add(conv, biases)
    conv2 = tf.nn.relu(pre_activation, name=scope.name)
    _activation_summary(conv2)
  norm2 = tf.nn.lrn(conv2, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm2')
  pool2 = tf.nn.max_pool2d(norm2, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                           padding='SAME', name='pool2')
  with v1.variable_scope('local3') as scope:
    reshape = tf.reshape(pool2, [BATCH_SIZE, -1])
    dim = reshape.get_shape()[1]
    weights = _variable_with_weight_decay('weights', shape=[dim, 384],
                                          stddev=0.04, wd=0.004)
    biases = _variable_on_cpu('biases', [384], v1.constant_initializer(0.1))
    local3 = tf.nn.relu(tf.matmul(reshape, weights) + biases, name=scope.name)
    _activation_summary(local3)
  with v1.variable_scope('local4') as scope:
    weights = _variable_with_weight_decay('weights', shape=[384, 192],
                                          stddev=0.04, wd=0.004)
    biases = _variable_on_cpu('biases', [192], v1.constant_initializer(0.1))
    local4 = tf.nn.relu(tf.matmul(local3, weights) + biases, name=scope.name)
    _activation_summary(local4)
  with v1.variable_scope('softmax_linear') as scope:
    weights = _variable_with_weight_decay('weights', [192, NUM_CLASSES],
                                          stddev=1 / 192.0, wd=None)
    biases = _variable_on_cpu('biases', [NUM_CLASSES], v1.constant_initializer(0.0))
    softmax_linear = tf.add(tf.matmul(local4, weights), biases, name=scope.name)
    _activation_summary(softmax_linear)
  return softmax_linear


def loss(logits, labels):
  labels = tf.cast(labels, tf.int64)
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits, name='cross_entropy_per_example')
  cross_entropy_mean = tf.reduce_mean(cross_entropy, name='cross_entropy')
  v1.add_to_collection('losses', cross_entropy_mean)
  return tf.add_n(v1.get_collection('losses'), name='total_loss')


def _add_loss_summaries(total_loss):
  # Compute the moving average of all individual losses and the total loss.
  loss_averages = v1.train.ExponentialMovingAverage(0.9, name='avg')
  losses = v1.get_collection('losses')
  loss_averages_op = loss_averages.apply(losses + [total_loss])
  # Attach a scalar summary to all individual losses and the total loss; do the
  # same for the averaged version of the losses.
  for l in losses + [total_loss]:
    v1.summary.scalar(l.op.name + ' (raw)', l)
    v1.summary.scalar(l.op.name, loss_averages.average(l))
  return loss_averages_op


def train(total_loss, global_step):
  num_batches_per_epoch = NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN / BATCH_SIZE
  decay_steps = int(num_batches_per_epoch * NUM_EPOCHS_PER_DECAY)
  lr = v1.train.exponential_decay(INITIAL_LEARNING_RATE, global_step, decay_steps,
                                  LEARNING_RATE_DECAY_FACTOR, staircase=True)
  v1.summary.scalar('learning_rate', lr)
  loss_averages_op = _add_loss_summaries(total_loss)
  with tf.control_dependencies([loss_averages_op]):
    opt = v1.train.GradientDescentOptimizer(lr)
    grads = opt.compute_gradients(total_loss)
  apply_gradient_op = opt.apply_gradients(grads, global_step=global_step)
  for var in v1.trainable_variables():
    v1.summary.histogram(var.op.name, var)
  for grad, var in grads:
    if grad is not None:
      v1.summary.histogram(var.op.name + '/gradients', grad)
  variable_averages = v1.train.ExponentialMovingAverage(MOVING_AVERAGE_DECAY,
                                                        global_step)
  with tf.control_dependencies([apply_gradient_op]):
    variables_averages_op = variable_averages.apply(v1.trainable_variables())
  return variables_averages_op


# ---- cifar10_input.py, as the tutorial wrote it: queue runners ----

def read_cifar10(filename_queue):
  """Reads one record of the CIFAR-10 binary format: 1 label byte, 3072 image bytes."""

  class CIFAR10Record(object):
    pass
  result = CIFAR10Record()
  label_bytes = 1
  result.height, result.width, result.depth = 32, 32, 3
  image_bytes = result.height * result.width * result.depth
  record_bytes = label_bytes + image_bytes
  reader = v1.FixedLengthRecordReader(record_bytes=record_bytes)
  result.key, value = reader.read(filename_queue)
  record_bytes = v1.decode_raw(value, tf.uint8)
  result.label = tf.cast(tf.strided_slice(record_bytes, [0], [label_bytes]), tf.int32)
  depth_major = tf.reshape(
      tf.strided_slice(record_bytes, [label_bytes], [label_bytes + image_bytes]),
      [result.depth, result.height, result.width])
  result.uint8image = tf.transpose(depth_major, [1, 2, 0])
  return result


def _generate_image_and_label_batch(image, label, min_queue_examples, batch_size,
                                    shuffle):
  num_preprocess_threads = 16
  if shuffle:
    images, label_batch = v1.train.shuffle_batch(
        [image, label], batch_size=batch_size, num_threads=num_preprocess_threads,
        capacity=min_queue_examples + 3 * batch_size,
        min_after_dequeue=min_queue_examples)
  else:
    images, label_batch = v1.train.batch(
        [image, label], batch_size=batch_size, num_threads=num_preprocess_threads,
        capacity=min_queue_examples + 3 * batch_size)
  v1.summary.image('images', images)
  return images, tf.reshape(label_batch, [batch_size])


def distorted_inputs(data_dir, batch_size):
  """The tutorial's training input: random crops, flips and colour changes."""
  filenames = [os.path.join(data_dir, 'data_batch_%d.bin' % i) for i in range(1, 6)]
  for f in filenames:
    if not v1.gfile.Exists(f):
      raise ValueError('Failed to find file: ' + f)
  filename_queue = v1.train.string_input_producer(filenames)
  with tf.name_scope('data_augmentation'):
    read_input = read_cifar10(filename_queue)
    reshaped_image = tf.cast(read_input.uint8image, tf.float32)
    height, width = IMAGE_SIZE, IMAGE_SIZE
    distorted_image = v1.random_crop(reshaped_image, [height, width, 3])
    distorted_image = tf.image.random_flip_left_right(distorted_image)
    distorted_image = tf.image.random_brightness(distorted_image, max_delta=63)
    distorted_image = tf.image.random_contrast(distorted_image, lower=0.2, upper=1.8)
    float_image = tf.image.per_image_standardization(distorted_image)
    float_image.set_shape([height, width, 3])
    read_input.label.set_shape([1])
    min_fraction_of_examples_in_queue = 0.4
    min_queue_examples = int(_EXAMPLES_PER_EPOCH.value *
                             min_fraction_of_examples_in_queue)
    print('Filling queue with %d CIFAR images before starting to train. '
          'This will take a few minutes.' % min_queue_examples)
  return _generate_image_and_label_batch(float_image, read_input.label,
                                         min_queue_examples, batch_size,
                                         shuffle=True)


# ---- not the tutorial's: its data, or a stand-in; and tf.data for exact runs ----

def _binary_files(data_dir):
  """`data_dir` holding the tutorial's binary files, or a directory of synthetic
  ones in that format (a label byte, then the image channel by channel)."""
  if data_dir:
    return data_dir
  data_dir = tempfile.mkdtemp(prefix='cifar10_bin_')
  data = cifar10_input.synthetic(num_train=5 * 200, num_test=1)
  images, labels = data.train
  records = np.concatenate(
      [labels.astype(np.uint8)[:, None],
       images.transpose(0, 3, 1, 2).reshape(len(labels), -1)], axis=1)
  for i, part in enumerate(np.split(records, 5), 1):
    part.tofile(os.path.join(data_dir, 'data_batch_%d.bin' % i))
  return data_dir


def dataset_inputs():
  """Random 24x24 images through a one-shot iterator: the same batches in every
  run, so that two runs' losses can be compared."""
  rng = np.random.default_rng(0)
  images = rng.normal(size=(4 * BATCH_SIZE, IMAGE_SIZE, IMAGE_SIZE, 3))
  labels = rng.integers(0, NUM_CLASSES, size=(4 * BATCH_SIZE,))
  dataset = tf.data.Dataset.from_tensor_slices(
      (images.astype(np.float32), labels.astype(np.int32)))
  dataset = dataset.repeat().batch(BATCH_SIZE, drop_remainder=True)
  return v1.data.make_one_shot_iterator(dataset).get_next()


# ---- cifar10_train.py ----

def main(argv):
  del argv
  v1.logging.set_verbosity(v1.logging.INFO)
  if _WORKERS.value and 'TF_CONFIG' not in os.environ:
    return _launch_workers()
  if _GRAPH.value == 'tfmon':
    graph, training = tfmon.Graph, tfmon.train
  else:
    graph, training = tf.Graph, v1.train

  def build():
    if _SEED.value is not None:
      v1.set_random_seed(_SEED.value)
    global_step = v1.train.get_or_create_global_step()
    with tf.device('/cpu:0'):
      if _INPUT.value == 'queues':
        images, labels = distorted_inputs(_binary_files(_DATA_DIR.value), BATCH_SIZE)
      else:
        images, labels = dataset_inputs()
    logits = inference(images)
    total_loss = loss(logits, labels)
    train_op = train(total_loss, global_step)
    return total_loss, train_op

  if 'TF_CONFIG' in os.environ:  # a worker: the graph built once per replica
    graph, (total_loss, train_op) = tfmon.train.capture_graph(
        build, strategy=tf.distribute.MultiWorkerMirroredStrategy())
  else:
    graph = graph()
    with graph.as_default():
      total_loss, train_op = build()

  with graph.as_default():
    class _LoggerHook(v1.train.SessionRunHook):
      """Logs loss and runtime."""

      def begin(self):
        self._step = -1
        self._start_time = time.time()

      def before_run(self, run_context):
        self._step += 1
        return v1.train.SessionRunArgs(total_loss)

      def after_run(self, run_context, run_values):
        if self._step % _LOG_FREQUENCY.value == 0:
          current_time = time.time()
          duration = current_time - self._start_time
          self._start_time = current_time
          examples_per_sec = _LOG_FREQUENCY.value * BATCH_SIZE / duration
          v1.logging.info('step %d, loss = %.2f (%.1f examples/sec)', self._step,
                          run_values.results, examples_per_sec)

    with training.MonitoredTrainingSession(
        checkpoint_dir=_TRAIN_DIR.value,
        hooks=[v1.train.StopAtStepHook(last_step=_MAX_STEPS.value),
               v1.train.NanTensorHook(total_loss),
               _LoggerHook()],
        save_checkpoint_steps=_SAVE_STEPS.value) as mon_sess:
      while not mon_sess.should_stop():
        mon_sess.run(train_op)


# ---- not the tutorial's: training on several worker processes ----

def _launch_workers():
  """Runs this script with the same flags, minus --workers, as N local
  workers (TF_CONFIG each) in one train_dir; returns their exit code."""
  if _GRAPH.value != 'tfmon':
    raise app.UsageError('--workers needs --graph tfmon: TF1 graph mode trains on '
                         'several processes through parameter servers only.')
  command = [sys.executable, os.path.abspath(__file__)] + [
      flags.FLAGS[name].serialize() for name in flags.FLAGS
      if flags.FLAGS[name].present and name == flags.FLAGS[name].name and
      name != 'workers']
  if not flags.FLAGS['train_dir'].present:
    command.append(flags.FLAGS['train_dir'].serialize())
  v1.logging.info('Launching %d workers: %s', _WORKERS.value, ' '.join(command))
  return launch.launch(command, _WORKERS.value)


if __name__ == '__main__':
  app.run(main)
