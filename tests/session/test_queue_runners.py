"""Queue-runner input, as TF1 programs of 2016-2018 read their data: readers,
`string_input_producer`, `batch`/`shuffle_batch` and the threads a session
starts through its coordinator, under `tfmon.Graph` as under TF1."""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfmon

_RECORD_BYTES = 1 + 8  # a label byte and a 2x2x2 image, as the CIFAR-10 files


def _write_records(directory, files=2, records=30):
  paths = []
  for i in range(files):
    path = os.path.join(directory, f'data_batch_{i}.bin')
    rows = np.arange(records * _RECORD_BYTES, dtype=np.uint8).reshape(records, -1)
    rows[:, 0] = (np.arange(records) + i) % 10
    rows.tofile(path)
    paths.append(path)
  return paths


def _input(paths, shuffle):
  """TF's CIFAR-10 tutorial's input, in small: its reader, decoding and batching."""
  filenames = tf.compat.v1.train.string_input_producer(paths, num_epochs=2, shuffle=False)
  reader = tf.compat.v1.FixedLengthRecordReader(record_bytes=_RECORD_BYTES)
  _, value = reader.read(filenames)
  record = tf.io.decode_raw(value, tf.uint8)
  label = tf.cast(tf.strided_slice(record, [0], [1]), tf.int32)
  label.set_shape([1])
  image = tf.cast(tf.reshape(tf.strided_slice(record, [1], [_RECORD_BYTES]), [2, 2, 2]),
                  tf.float32)
  if shuffle:
    return tf.compat.v1.train.shuffle_batch(
        [image, label], batch_size=6, num_threads=4, capacity=50, min_after_dequeue=10)
  return tf.compat.v1.train.batch([image, label], batch_size=6, num_threads=1, capacity=50)


def _read_all(graph_class, train, paths, shuffle=False):
  with graph_class().as_default():
    images, labels = _input(paths, shuffle)
    total = tf.reduce_sum(images)
    step = tf.compat.v1.train.get_or_create_global_step()
    count = tf.compat.v1.assign_add(step, 1)
    totals = []
    with train.MonitoredTrainingSession() as sess:
      while not sess.should_stop():
        value, _, batch_labels = sess.run([total, count, labels])
        totals.append(float(value))
        assert batch_labels.shape == (6, 1)
  return totals


@pytest.mark.parametrize('train', [tfmon.train, tf.compat.v1.train],
                         ids=['tfmon_session', 'tfs_own_session'])
def test_queue_runners_feed_batches_until_the_epochs_end_as_in_tf1(tmp_path, train):
  paths = _write_records(str(tmp_path))
  tf1 = _read_all(tf.Graph, tf.compat.v1.train, paths)
  ours = _read_all(tfmon.Graph, train, paths)
  assert len(tf1) == 20  # 2 files x 30 records x 2 epochs, in batches of 6
  assert ours == tf1


def test_shuffle_batch_with_several_threads_reads_every_epoch(tmp_path):
  paths = _write_records(str(tmp_path))
  tf1 = _read_all(tf.Graph, tf.compat.v1.train, paths, shuffle=True)
  ours = _read_all(tfmon.Graph, tfmon.train, paths, shuffle=True)
  assert len(ours) == len(tf1) == 20  # full batches only: the queue then closes


def test_a_session_closed_early_stops_its_queue_runner_threads(tmp_path):
  import threading  # pylint: disable=g-import-not-at-top
  paths = _write_records(str(tmp_path))
  before = threading.active_count()
  with tfmon.Graph().as_default():
    images, _ = _input(paths, shuffle=True)
    with tfmon.train.MonitoredTrainingSession() as sess:
      sess.run(images)
      assert threading.active_count() > before
  assert threading.active_count() == before


def test_a_queue_runners_threads_share_one_function(tmp_path):
  # Sixteen threads run one enqueue op at once: one of them prunes its function
  # from the graph (0.2 s on the CIFAR-10 tutorial's), the others use it.
  from tfmon.compiled import graph_call  # pylint: disable=import-outside-toplevel
  paths = _write_records(str(tmp_path))
  with tfmon.Graph().as_default():
    filenames = tf.compat.v1.train.string_input_producer(paths, shuffle=False)
    _, value = tf.compat.v1.FixedLengthRecordReader(record_bytes=_RECORD_BYTES).read(
        filenames)
    record = tf.reshape(tf.io.decode_raw(value, tf.uint8), [_RECORD_BYTES])
    batch = tf.compat.v1.train.shuffle_batch(
        [record], batch_size=4, num_threads=16,
        capacity=40, min_after_dequeue=8)
    with tfmon.train.MonitoredSession() as sess:
      for _ in range(3):
        assert sess.run(batch).shape == (4, _RECORD_BYTES)
      built = sum(call.functions_built for call in graph_call._open_calls)  # pylint: disable=protected-access
  # The batch's, the file names' enqueue, the shuffle queue's enqueue.
  assert built <= 3
