r"""TensorFlow's "Multi-worker training with Estimator" tutorial on tfmon.estimator.

The `input_fn` and `model_fn` below are the tutorial's own
(tensorflow/docs, site/en/tutorials/distribute/multi_worker_with_estimator):
a Keras CNN in the `model_fn`, a v1 optimizer, `input_fn(mode, input_context)`
sharding the data by worker, `RunConfig(train_distribute=
MultiWorkerMirroredStrategy())` and `train_and_evaluate`. Its changes are those
TF 2.16+ forces: `tf.estimator` -> `tfmon.estimator`; Keras 2 (`tf_keras`),
whose `Reduction.NONE` Keras 3 lacks; no `disable_eager_execution()` (tfmon runs
on TF2's runtime; the tutorial needed it for TF 2.4's pickling bug); and the
data: the tutorial read MNIST from TensorFlow Datasets, this makes 28x28
synthetic digits (a bar whose position is the class), so it needs no network.

Each worker runs this script with its TF_CONFIG, a cluster of workers as the
tutorial set it: `python -m tfmon.examples.launch --workers 2 -- python
examples/estimator_multi_worker.py --model_dir /tmp/multiworker`.
"""

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfmon import estimator

_MODEL_DIR = flags.DEFINE_string('model_dir', '/tmp/multiworker', 'The model directory.')
_EXAMPLES = flags.DEFINE_integer('examples', 2048, 'Synthetic training examples.')

BUFFER_SIZE = 10000
BATCH_SIZE = 64
LEARNING_RATE = 1e-4


def synthetic_mnist(count, seed):
  """`count` 28x28x1 images whose class is where a bright bar is, and labels."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 10, size=count).astype(np.int64)
  images = rng.uniform(0, 64, size=(count, 28, 28, 1)).astype(np.uint8)
  for image, label in zip(images, labels):
    image[:, 2 + 2 * label:4 + 2 * label] = 255
  return images, labels


def input_fn(mode, input_context=None):
  """The tutorial's, on synthetic digits in place of tfds' MNIST."""
  train = mode == estimator.ModeKeys.TRAIN
  mnist_dataset = tf.data.Dataset.from_tensor_slices(
      synthetic_mnist(_EXAMPLES.value if train else 512, seed=0 if train else 1))

  def scale(image, label):
    image = tf.cast(image, tf.float32)
    image /= 255
    return image, label

  if input_context:
    mnist_dataset = mnist_dataset.shard(input_context.num_input_pipelines,
                                        input_context.input_pipeline_id)
  return mnist_dataset.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE)


def model_fn(features, labels, mode):
  """The tutorial's."""
  model = keras.Sequential([
      keras.layers.Conv2D(32, 3, activation='relu', input_shape=(28, 28, 1)),
      keras.layers.MaxPooling2D(),
      keras.layers.Flatten(),
      keras.layers.Dense(64, activation='relu'),
      keras.layers.Dense(10)
  ])
  logits = model(features, training=False)

  if mode == estimator.ModeKeys.PREDICT:
    predictions = {'logits': logits}
    return estimator.EstimatorSpec(labels=labels, predictions=predictions)

  optimizer = tf.compat.v1.train.GradientDescentOptimizer(
      learning_rate=LEARNING_RATE)
  loss = keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=keras.losses.Reduction.NONE)(labels, logits)
  loss = tf.reduce_sum(loss) * (1. / BATCH_SIZE)
  if mode == estimator.ModeKeys.EVAL:
    return estimator.EstimatorSpec(mode, loss=loss)

  return estimator.EstimatorSpec(
      mode=mode,
      loss=loss,
      train_op=optimizer.minimize(
          loss, tf.compat.v1.train.get_or_create_global_step()))


def main(argv):
  del argv
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  config = estimator.RunConfig(train_distribute=strategy)
  classifier = estimator.Estimator(
      model_fn=model_fn, model_dir=_MODEL_DIR.value, config=config)
  estimator.train_and_evaluate(
      classifier,
      train_spec=estimator.TrainSpec(input_fn=input_fn),
      eval_spec=estimator.EvalSpec(input_fn=input_fn)
  )


if __name__ == '__main__':
  app.run(main)
