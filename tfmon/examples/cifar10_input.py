"""CIFAR-10 input with tf.data: the official files, or an embedded synthetic stand-in.

Reads either official format (found by `cifar10_files`):
  - binary: records of 1 label byte + 3,072 image bytes, channel-major;
  - python: pickled dicts with b'data' and b'labels', as Keras' dataset cache
    keeps them.
With no directory given, Keras' cache (~/.keras/datasets) is looked at; with
nothing found, a synthetic CIFAR-shaped dataset with learnable structure is
generated, so the example never needs the network.
"""

import os
import pickle

import numpy as np
import tensorflow as tf

from tfmon.examples import cifar10_files

IMAGE_SIZE = 32
CROP_SIZE = 24  # the TF1 tutorial trained on random 24x24 crops
NUM_CLASSES = 10
_RECORD_BYTES = 1 + IMAGE_SIZE * IMAGE_SIZE * 3
_EXPECTED = cifar10_files.EXPECTED
DataError = cifar10_files.DataError  # what load raises, for any file it cannot use


class CifarData:
  """Where the data came from, and its train and test splits as numpy arrays.

  Attributes:
    source: A description for the log ('binary files in DIR', 'synthetic', ...).
    train: (images uint8 [N, 32, 32, 3], labels int64 [N]).
    test: The same for the test split.
    flip_invariant: Whether a mirrored image keeps its label (training flips).
  """

  def __init__(self, source, train, test, flip_invariant=True):
    self.source = source
    self.train = train
    self.test = test
    self.flip_invariant = flip_invariant


def _check_labels(path, labels):
  bad = np.unique(labels[(labels < 0) | (labels >= NUM_CLASSES)])
  if bad.size:
    raise DataError(
        f'{path} has labels outside 0-{NUM_CLASSES - 1}: {bad[:5].tolist()} '
        f'({np.sum((labels < 0) | (labels >= NUM_CLASSES))} of {len(labels)} '
        f'records). It is not a CIFAR-10 batch. Expected {_EXPECTED}.')
  return labels


def _read_binary(path):
  size = os.path.getsize(path)
  if size == 0 or size % _RECORD_BYTES:
    raise DataError(
        f'{path} is not a CIFAR-10 binary batch: its size ({size} bytes) is not a '
        f'multiple of {_RECORD_BYTES} (1 label byte + 3072 image bytes); the file '
        f'may be truncated. Expected {_EXPECTED}.')
  records = np.fromfile(path, np.uint8).reshape(-1, _RECORD_BYTES)
  images = records[:, 1:].reshape(-1, 3, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
  return images, _check_labels(path, records[:, 0].astype(np.int64))


def _read_python(path):
  try:
    with open(path, 'rb') as f:
      batch = pickle.load(f, encoding='bytes')
    data = np.asarray(batch[b'data'], np.uint8).reshape(-1, 3, IMAGE_SIZE, IMAGE_SIZE)
    labels = np.asarray(batch[b'labels'], np.int64)
  except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as e:
    raise DataError(
        f'{path} is not a CIFAR-10 python batch ({type(e).__name__}: {e}); the file '
        f'may be truncated. Expected {_EXPECTED}.') from None
  if len(data) != len(labels):
    raise DataError(f'{path} has {len(data)} images but {len(labels)} labels. '
                     f'Expected {_EXPECTED}.')
  return data.transpose(0, 2, 3, 1), _check_labels(path, labels)


def _read_split(paths, reader):
  parts = [reader(p) for p in paths]
  return (np.concatenate([images for images, _ in parts]),
          np.concatenate([labels for _, labels in parts]))


def synthetic(num_train=10000, num_test=1000, seed=0):
  """CIFAR-shaped data a CNN learns gradually: oriented gratings under noise.

  Class k is a sinusoidal grating at angle k * 18 degrees, with a random phase,
  frequency jitter and base colour, plus heavy pixel noise, as uint8 32x32x3.
  Neighbouring classes differ by 18 degrees, so accuracy climbs over hundreds of
  steps rather than at once.
  """
  rng = np.random.default_rng(seed)
  grid = np.arange(IMAGE_SIZE, dtype=np.float32) - IMAGE_SIZE / 2
  y, x = np.meshgrid(grid, grid, indexing='ij')

  def make(count):
    labels = rng.integers(0, NUM_CLASSES, size=count)
    angle = labels * np.pi / NUM_CLASSES
    frequency = rng.uniform(0.25, 0.35, size=count)
    phase = rng.uniform(0, 2 * np.pi, size=count)
    wave = np.sin(frequency[:, None, None] *
                  (x * np.cos(angle)[:, None, None] + y * np.sin(angle)[:, None, None]) +
                  phase[:, None, None])
    base = rng.uniform(80, 176, size=(count, 1, 1, 3))
    images = base + 24 * wave[..., None] + rng.normal(scale=72.0, size=(count, 32, 32, 3))
    return np.clip(images, 0, 255).astype(np.uint8), labels.astype(np.int64)

  # A mirrored grating has another angle, hence another class: no flips.
  return CifarData('synthetic CIFAR-shaped data (no CIFAR-10 files found)',
                   make(num_train), make(num_test), flip_invariant=False)


def load(data_dir=None):
  """Loads CIFAR-10 from `data_dir` (or Keras' cache), else synthetic data.

  Args:
    data_dir: A directory holding either official format, or None.

  Returns:
    A `CifarData`.

  Raises:
    DataError: `data_dir` does not exist, holds neither format or only part of
      one (the message names the files missing), or a file in it is truncated
      or malformed, or has labels outside 0-9 (the message names the file).
  """
  found = cifar10_files.find(data_dir) if data_dir else cifar10_files.find_in_keras_cache()
  if found is None:
    return synthetic()
  reader = _read_binary if found.kind == 'binary' else _read_python
  return CifarData(f'CIFAR-10 {found.kind} files in {found.folder}',
                   _read_split(found.train, reader), _read_split(found.test, reader))


def _standardize(image):
  return tf.image.per_image_standardization(image)


def train_dataset(data, batch_size, seed=0, num_shards=1, shard_index=0):
  """Shuffled, augmented training batches, repeated forever (the tutorial's input).

  With `num_shards` > 1 it holds every `num_shards`-th example from
  `shard_index` on: one worker's share of the training data.
  """
  images, labels = data.train

  def augment(image, label):
    image = tf.image.random_crop(tf.cast(image, tf.float32), [CROP_SIZE, CROP_SIZE, 3])
    if data.flip_invariant:
      image = tf.image.random_flip_left_right(image)
    return _standardize(image), label

  dataset = tf.data.Dataset.from_tensor_slices((images, labels))
  if num_shards > 1:
    # First, so that each worker shuffles and augments its own examples only.
    dataset = dataset.shard(num_shards, shard_index)
  return (dataset
          .shuffle(len(labels), seed=seed).repeat()
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(batch_size, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))


def eval_dataset(data, batch_size, max_examples=None):
  """Centre-cropped, standardized test batches, one pass."""
  images, labels = data.test
  if max_examples:
    images, labels = images[:max_examples], labels[:max_examples]

  def crop(image, label):
    image = tf.image.resize_with_crop_or_pad(tf.cast(image, tf.float32),
                                             CROP_SIZE, CROP_SIZE)
    return _standardize(image), label

  return (tf.data.Dataset.from_tensor_slices((images, labels))
          .map(crop, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(batch_size))
