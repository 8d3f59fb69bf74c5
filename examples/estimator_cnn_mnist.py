r"""TensorFlow's TF1 layers tutorial, cnn_mnist.py, on tfmon.estimator.

The `cnn_model_fn` below is the tutorial's own (tf.compat.v1.layers, which need
tf_keras: `pip install --no-deps tf_keras`); its only changes are the two that
TF 2.16+ forces: `tf.estimator` -> `tfmon.estimator`, and the data: the tutorial
downloaded MNIST, this writes 28x28 synthetic digits (a bar whose position is
the class) so it runs without the network.

  python examples/estimator_cnn_mnist.py --model_dir /tmp/mnist_convnet_model
"""

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from tfmon import estimator

_MODEL_DIR = flags.DEFINE_string('model_dir', '/tmp/mnist_convnet_model',
                                 'Where the Estimator keeps its checkpoints.')
_STEPS = flags.DEFINE_integer('steps', 200, 'Training steps.')


def cnn_model_fn(features, labels, mode):
  """Model function for CNN (the tutorial's)."""
  input_layer = tf.reshape(features['x'], [-1, 28, 28, 1])
  conv1 = tf.compat.v1.layers.conv2d(inputs=input_layer, filters=32, kernel_size=[5, 5],
                                     padding='same', activation=tf.nn.relu)
  pool1 = tf.compat.v1.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
  conv2 = tf.compat.v1.layers.conv2d(inputs=pool1, filters=64, kernel_size=[5, 5],
                                     padding='same', activation=tf.nn.relu)
  pool2 = tf.compat.v1.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)
  pool2_flat = tf.reshape(pool2, [-1, 7 * 7 * 64])
  dense = tf.compat.v1.layers.dense(inputs=pool2_flat, units=1024, activation=tf.nn.relu)
  dropout = tf.compat.v1.layers.dropout(
      inputs=dense, rate=0.4, training=mode == estimator.ModeKeys.TRAIN)
  logits = tf.compat.v1.layers.dense(inputs=dropout, units=10)

  predictions = {
      'classes': tf.argmax(input=logits, axis=1),
      'probabilities': tf.nn.softmax(logits, name='softmax_tensor'),
  }
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode=mode, predictions=predictions)

  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == estimator.ModeKeys.TRAIN:
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=0.001)
    train_op = optimizer.minimize(loss=loss,
                                  global_step=tf.compat.v1.train.get_global_step())
    return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

  eval_metric_ops = {
      'accuracy': tf.compat.v1.metrics.accuracy(labels=labels,
                                                predictions=predictions['classes'])}
  return estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


def synthetic_mnist(count, seed):
  """28x28 images in [0, 1] whose class is the row of a bright bar, and labels."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 10, size=count).astype(np.int32)
  images = rng.uniform(0.0, 0.3, size=(count, 28, 28)).astype(np.float32)
  for image, label in zip(images, labels):
    image[2 + 2 * label:4 + 2 * label, 4:24] = 1.0
  return images.reshape(count, 784), labels


def main(argv):
  del argv
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  train_data, train_labels = synthetic_mnist(2000, seed=0)
  eval_data, eval_labels = synthetic_mnist(500, seed=1)

  mnist_classifier = estimator.Estimator(model_fn=cnn_model_fn,
                                         model_dir=_MODEL_DIR.value)
  logging_hook = tf.compat.v1.train.LoggingTensorHook(
      tensors={'probabilities': 'softmax_tensor'}, every_n_iter=50)
  train_input_fn = estimator.inputs.numpy_input_fn(
      x={'x': train_data}, y=train_labels, batch_size=100, num_epochs=None,
      shuffle=True)
  mnist_classifier.train(input_fn=train_input_fn, steps=_STEPS.value,
                         hooks=[logging_hook])

  eval_input_fn = estimator.inputs.numpy_input_fn(
      x={'x': eval_data}, y=eval_labels, num_epochs=1, shuffle=False)
  eval_results = mnist_classifier.evaluate(input_fn=eval_input_fn)
  print(eval_results)


if __name__ == '__main__':
  app.run(main)
