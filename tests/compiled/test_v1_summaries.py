"""tf.compat.v1.summary calls in a step are written as TF1 wrote them (SPEC §7)."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import tfmon
from tests import event_files

v1 = tf.compat.v1


def _tf1_style_step():
  """A step written as TF1 graph code: get_variable, v1 summaries, merge_all."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    weights = v1.get_variable('weights', [4], initializer=v1.ones_initializer())
    with tf.name_scope('train'):
      loss = tf.reduce_sum(weights) * tf.cast(global_step + 1, tf.float32)
      v1.summary.scalar('loss', loss)
    v1.summary.histogram('weights', weights)
    v1.summary.scalar('lr', 0.5, family='optimizer')
    v1.summary.image('input', tf.zeros([1, 2, 2, 3]))
    v1.summary.text('note', tf.constant('hello'))
    merged = v1.summary.merge_all()
    global_step.assign_add(1)
    return {'loss': loss, 'summary': merged}

  return step


def test_v1_summaries_are_v1_protos_on_the_hooks_schedule(tmp_path):
  step = _tf1_style_step()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=2,
      save_checkpoint_secs=None, log_step_count_steps=None) as sess:
    for _ in range(5):
      sess.run(tfmon.train.op(step))
  accumulator = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={
      event_accumulator.HISTOGRAMS: 0, event_accumulator.IMAGES: 0,
      event_accumulator.TENSORS: 0})
  accumulator.Reload()
  # Scalars as simple_value, stamped with the post-step global step: 1, 3, 5.
  assert event_files.scalars(accumulator, 'train/loss') == ([1, 3, 5], [4.0, 12.0, 20.0])
  assert event_files.scalars(accumulator, 'optimizer/optimizer/lr')[0] == [1, 3, 5]
  assert event_files.simple_values(tmp_path, 'train/loss') == {1: 4.0, 3: 12.0, 5: 20.0}
  assert [h.step for h in accumulator.Histograms('weights')] == [1, 3, 5]
  assert accumulator.Histograms('weights')[0].histogram_value.num == 4
  assert [i.step for i in accumulator.Images('input/image/0')] == [1, 3, 5]
  assert [t.step for t in accumulator.Tensors('note')] == [1, 3, 5]


def test_v1_summaries_record_only_the_last_step_of_a_fused_run(tmp_path):
  step = _tf1_style_step()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=4, steps_per_loop=10,
      save_checkpoint_secs=None, log_step_count_steps=None,
      hooks=[tfmon.train.StopAtStepHook(last_step=9)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))
  assert event_files.simple_values(tmp_path, 'train/loss') == {
      1: 4.0, 5: 20.0, 9: 36.0}


def test_what_only_a_summary_uses_runs_on_recording_steps_only(tmp_path):
  # As in TF1, which computed a summary's inputs only when a hook fetched it:
  # here a gather with an out-of-range index fails if it runs at all.
  global_step = tfmon.train.get_or_create_global_step()
  table = tf.constant([10.0, 20.0, 30.0])

  def step(index):
    loss = tf.reduce_sum(table) * tf.cast(global_step + 1, tf.float32)
    v1.summary.scalar('looked_up', tf.gather(table, index) * 2.0)
    v1.summary.scalar('loss', loss)  # also returned: computed every step
    with tf.control_dependencies([global_step.assign_add(1)]):
      return {'loss': tf.identity(loss)}

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=2,
      save_checkpoint_secs=None, log_step_count_steps=None) as sess:
    # Steps 0, 2 and 4 record; the others look up index 7 of 3.
    losses = [sess.run(step, feed_dict={'index': i % 3 if i % 2 == 0 else 7})
              for i in range(6)]
    with pytest.raises(tf.errors.InvalidArgumentError, match='7 is not in'):
      sess.run(step, feed_dict={'index': 7})  # step 6 records
  assert [r['loss'] for r in losses] == [60.0, 120.0, 180.0, 240.0, 300.0, 360.0]
  assert event_files.simple_values(tmp_path, 'looked_up') == {1: 20.0, 3: 60.0, 5: 40.0}
  assert event_files.simple_values(tmp_path, 'loss') == {1: 60.0, 3: 180.0, 5: 300.0}


def test_summaries_in_a_nested_function_are_written_where_called(tmp_path):
  global_step = tfmon.train.get_or_create_global_step()

  @tf.function
  def log_twice(value):
    v1.summary.scalar('twice', value * 2.0)
    return value

  def step():
    value = log_twice(tf.cast(global_step, tf.float32))
    global_step.assign_add(1)
    return {'value': value}

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=2,
      save_checkpoint_secs=None, log_step_count_steps=None) as sess:
    for _ in range(3):
      sess.run(tfmon.train.op(step))
  assert event_files.simple_values(tmp_path, 'twice') == {1: 0.0, 3: 4.0}


def test_under_a_strategy_only_the_first_replica_writes(tmp_path):
  # TF1 wrote a summary from the first replica (tower) only.
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  with strategy.scope():
    global_step = tfmon.train.get_or_create_global_step()

  def replica_step():
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    value = tf.cast(replica, tf.float32) + tf.cast(global_step, tf.float32)
    v1.summary.scalar('replica_value', value * 10.0)
    return value

  def step():
    total = strategy.reduce('SUM', strategy.run(replica_step), axis=None)
    global_step.assign_add(1)
    return {'total': total}

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=2, strategy=strategy,
      save_checkpoint_secs=None, log_step_count_steps=None) as sess:
    totals = [sess.run(step)['total'] for _ in range(3)]
  assert totals == [1.0, 3.0, 5.0]  # both replicas ran
  written = [(event.step, value.simple_value)
             for path in sorted(tmp_path.glob('events.out.tfevents.*'))
             for event in tf.compat.v1.train.summary_iterator(str(path))
             for value in event.summary.value if value.tag.endswith('replica_value')]
  assert written == [(1, 0.0), (3, 20.0)]  # replica 0's, once a recording step


def test_without_a_summary_writer_v1_summaries_cost_nothing():
  step = _tf1_style_step()
  with tfmon.train.MonitoredSession() as sess:
    results = [sess.run(step) for _ in range(3)]
  assert [r['loss'] for r in results] == [4.0, 8.0, 12.0]
  assert results[0]['summary'] == b''  # merge_all() gives what forwarded v1 ops give


def _free_port():
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_a_live_tensorboard_serves_the_v1_scalars(tmp_path):
  step = _tf1_style_step()
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=2,
      save_checkpoint_secs=None, log_step_count_steps=None) as sess:
    for _ in range(3):
      sess.run(tfmon.train.op(step))
  port = _free_port()
  server = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', '--logdir', str(tmp_path),
       '--port', str(port), '--host', 'localhost', '--load_fast', 'false'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  url = f'http://localhost:{port}/data/plugin/scalars/scalars?run=.&tag=train%2Floss'
  try:
    deadline = time.time() + 60
    points = None
    while time.time() < deadline:
      try:
        with urllib.request.urlopen(url, timeout=5) as response:
          points = json.load(response)
        if len(points) == 2:
          break
      except (urllib.error.URLError, ConnectionError):
        pass
      time.sleep(0.5)
  finally:
    server.terminate()
    server.wait(timeout=30)
  assert points is not None, 'tensorboard did not answer within 60 s'
  assert [(step, value) for _, step, value in points] == [(1, 4.0), (3, 12.0)]
