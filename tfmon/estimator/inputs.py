"""numpy_input_fn, as tf.estimator.inputs had it, on tf.data (TF1's used queue runners)."""

import numpy as np
import tensorflow as tf


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                   queue_capacity=1000, num_threads=1):
  """Returns an `input_fn` feeding dicts of numpy arrays (`x`) and labels (`y`).

  Args:
    x: A numpy array or a dict of them (the features).
    y: A numpy array of labels, or None.
    batch_size: Examples per batch.
    num_epochs: Passes over the data (None: forever).
    shuffle: Whether to shuffle: must be given, as TF1 required.
    queue_capacity: The shuffle buffer's size.
    num_threads: Accepted for compatibility.

  Raises:
    ValueError: `shuffle` not given, or arrays of different lengths.
  """
  del num_threads
  if not isinstance(shuffle, bool):
    raise ValueError(f'shuffle must be provided and explicitly set as boolean '
                     f'(it is recommended to set it as True for training); got {shuffle}')
  features = dict(x) if isinstance(x, dict) else x
  lengths = {len(v) for v in (features.values() if isinstance(features, dict) else [features])}
  if y is not None:
    lengths.add(len(y))
  if len(lengths) != 1:
    raise ValueError(f'x and y hold arrays of different lengths: {sorted(lengths)}.')

  def input_fn():
    data = (features, np.asarray(y)) if y is not None else features
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
      dataset = dataset.shuffle(queue_capacity)
    return dataset.repeat(num_epochs).batch(batch_size)

  return input_fn
