"""The TF1 CIFAR-10 tutorial's graph code under tfmon.Graph does what TF1 graph mode does."""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'examples',
                       'cifar10_tf1_graph.py')


def _train(graph, train_dir, inputs, *flags):
  done = subprocess.run(
      [sys.executable, _SCRIPT, f'--graph={graph}', f'--train_dir={train_dir}',
       f'--input={inputs}', '--examples_per_epoch=500',
       '--max_steps=20', '--save_steps=10', '--log_frequency=5', '--seed=7', *flags],
      capture_output=True, text=True, timeout=300)
  log = done.stderr + done.stdout  # a launcher's workers write to its stdout
  assert done.returncode == 0, log[-3000:]
  logged = [(int(step), loss) for step, loss in
            re.findall(r'INFO:tensorflow:step (\d+), loss = ([\d.]+)', log)]
  state = tf.train.get_checkpoint_state(str(train_dir))
  saved = [int(p.rsplit('-', 1)[-1]) for p in state.all_model_checkpoint_paths]
  return logged, saved, _variable_names(state.model_checkpoint_path)


def _variable_names(prefix):
  """The TF1 names a checkpoint holds: a TF2 checkpoint keeps them as full names."""
  reader = tf.train.load_checkpoint(prefix)
  if not reader.has_tensor('_CHECKPOINTABLE_OBJECT_GRAPH'):
    return set(reader.get_variable_to_shape_map())
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor('_CHECKPOINTABLE_OBJECT_GRAPH'))
  return {a.full_name for node in graph.nodes for a in node.attributes
          if a.full_name} - {'save_counter'}  # TF2's own count of saves


@pytest.mark.slow
def test_the_tutorial_logs_saves_and_names_its_variables_as_in_tf1(tmp_path):
  # tf.data input: the same batches in both runs, so the same losses.
  tf1_logged, tf1_saved, tf1_names = _train('tf1', tmp_path / 'tf1', 'dataset')
  logged, saved, names = _train('tfmon', tmp_path / 'tfmon', 'dataset')
  # The same steps and losses: with the graph's seed, the same initial values.
  assert logged == tf1_logged
  assert [step for step, _ in logged] == [0, 5, 10, 15]
  assert saved == tf1_saved == [0, 10, 20]
  assert names == tf1_names
  assert {'conv1/weights', 'local3/weights/ExponentialMovingAverage',
          'global_step'} <= names
  # The tutorial's own queue-runner reader: 16 threads fill a shuffle queue, so
  # batches (and losses) differ from run to run, in TF1 too; steps, saves and
  # names are TF1's (TF1 on this input logged and saved the same, by hand).
  logged, saved, queue_names = _train('tfmon', tmp_path / 'queues', 'queues')
  assert [step for step, _ in logged] == [0, 5, 10, 15]
  assert saved == [0, 10, 20]
  assert queue_names == tf1_names


@pytest.mark.slow
def test_the_tutorial_trains_on_two_worker_processes(tmp_path):
  # --workers 2: the tutorial's graph built once per worker under
  # MultiWorkerMirroredStrategy, each worker on its own queue-runner input.
  logged, saved, names = _train('tfmon', tmp_path, 'queues', '--workers=2')
  # Each worker logs its own loss every 5 steps; the chief checkpoints.
  assert sorted(step for step, _ in logged) == [0, 0, 5, 5, 10, 10, 15, 15]
  assert saved == [0, 10, 20]
  assert not [name for name in os.listdir(tmp_path) if name.startswith('workertemp')]
  assert {'conv1/weights', 'local3/weights/ExponentialMovingAverage',
          'global_step'} <= names
