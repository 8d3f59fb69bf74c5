"""The GPU check, for a machine with GPUs: a few minutes, every figure a ratio.

  python -m benchmarks.gpu_check            # on the machine's GPUs
  python -m benchmarks.gpu_check --cpu      # a dry run on 2 logical CPUs

1. Mirrored against single: the same TF1 graph code, built by
   `tfmon.train.capture_graph(build, strategy=MirroredStrategy(<all GPUs>))`
   and on one device, trained 20 steps on the same batches: the weights must
   agree within 1e-5, and the ms a step of each.
2. XLA against not: a step function under `jit_compile=True` and without, in
   tfmon's MonitoredSession on one GPU: ms a step.
3. Host syncs a step: in the TF2 profiler's trace of 10 mirrored training runs
   (`[train_op, loss]`), the device-to-host copies, and the functions and
   eager calls Python made, a run (TF2 leaves RunMetadata's step stats empty;
   the trace holds them).
4. `benchmarks.graph_mode` (MLP, hooks) and `benchmarks.estimator` (MLP, steady)
   on `/gpu:0`: tfmon against TF1's graph mode on the same device.
Nothing here has run on a GPU yet (this box has none): the dry run checks the
script, not GPU figures (on CPU there are no device copies to count).
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

_STEPS = 20


def _devices(cpu):
  """The devices to mirror over, set up before TensorFlow starts its runtime."""
  if cpu:
    physical = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(
        physical, [tf.config.LogicalDeviceConfiguration()] * 2)
    return [d.name for d in tf.config.list_logical_devices('CPU')]
  gpus = tf.config.list_logical_devices('GPU')
  if not gpus:
    raise SystemExit('No GPU: nothing to check. `--cpu` runs the check on 2 logical CPUs.')
  return [d.name for d in gpus]


def _build():
  """A TF1 MLP on a placeholder batch; returns (loss, train_op)."""
  v1 = tf.compat.v1
  x = v1.placeholder(tf.float32, [None, 64], name='x')
  hidden = tf.nn.relu(tf.matmul(x, v1.get_variable('w1', [64, 256],
                                                   initializer=v1.ones_initializer())))
  loss = tf.reduce_mean(tf.square(tf.matmul(hidden, v1.get_variable(
      'w2', [256, 1], initializer=v1.constant_initializer(1e-3))) - 1.0))
  return loss, v1.train.AdamOptimizer(1e-3).minimize(
      loss, global_step=v1.train.get_or_create_global_step())


_TRACED_RUNS = 10


def _train(strategy, batch, trace_dir=None):
  """ms a step and the final weights, training `_build` for _STEPS steps;
  with `trace_dir`, then traces _TRACED_RUNS more runs there."""
  import tfmon  # pylint: disable=import-outside-toplevel
  graph, (loss, train_op) = tfmon.train.capture_graph(_build, strategy=strategy)
  with graph.as_default():
    with tfmon.train.MonitoredSession() as sess:
      sess.run(train_op, feed_dict={'x:0': batch})  # trace and prune
      start = time.perf_counter()
      for _ in range(_STEPS - 1):
        sess.run([train_op, loss], feed_dict={'x:0': batch})
      seconds = (time.perf_counter() - start) / (_STEPS - 1)
      weights = sess.run([v for v in tf.compat.v1.trainable_variables()])
      if trace_dir:
        tf.profiler.experimental.start(trace_dir)
        for _ in range(_TRACED_RUNS):
          sess.run([train_op, loss], feed_dict={'x:0': batch})
        tf.profiler.experimental.stop()
  return 1e3 * seconds, [np.asarray(w) for w in weights]


def mirrored_against_single(devices, trace_dir):
  batch = np.random.default_rng(0).normal(size=(256, 64)).astype(np.float32)
  single_ms, single = _train(tf.distribute.OneDeviceStrategy(devices[0]), batch)
  mirrored_ms, mirrored = _train(tf.distribute.MirroredStrategy(devices), batch,
                                 trace_dir)
  gap = max(float(np.max(np.abs(a - b))) for a, b in zip(single, mirrored))
  print(f'1. mirrored over {len(devices)} devices: {mirrored_ms:.2f} ms a step, one '
        f'device {single_ms:.2f}; weights differ by {gap:.2e} (must be < 1e-5)')
  return gap < 1e-5


def host_syncs(trace_dir):
  from tfmon import tf_internals  # pylint: disable=import-outside-toplevel
  counts = tf_internals.trace_event_counts(trace_dir)
  if counts is None:
    print('3. host syncs: not counted (TensorFlow no longer ships its trace proto)')
    return
  copies = sum(n for name, n in counts.items()
               if 'dtoh' in name.lower() or 'd2h' in name.lower())
  print(f'3. a mirrored run: {copies / _TRACED_RUNS:.1f} device-to-host copies; '
        f'{counts["FunctionRun"] / _TRACED_RUNS:.1f} functions and '
        f'{counts["EagerExecute"] / _TRACED_RUNS:.1f} eager calls from Python '
        '(TF2 profiler trace)')


def xla_against_not(device):
  import tfmon  # pylint: disable=import-outside-toplevel
  times = {}
  for jit in (False, True):
    with tf.device(device):
      model = tf.keras.Sequential([tf.keras.layers.Dense(256, activation='relu'),
                                   tf.keras.layers.Dense(1)])
      optimizer = tf.keras.optimizers.Adam(1e-3)
      batch = tf.random.normal([256, 64])
      model(batch)

      def step():
        with tf.GradientTape() as tape:
          loss = tf.reduce_mean(tf.square(model(batch) - 1.0))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return {'loss': loss}

      runs = []
      with tfmon.train.MonitoredSession(jit_compile=jit or None) as sess:
        sess.run(tfmon.train.op(step))
        for _ in range(3):
          start = time.perf_counter()
          for _ in range(_STEPS):
            sess.run(tfmon.train.op(step))
          runs.append((time.perf_counter() - start) / _STEPS)
    times[jit] = 1e3 * statistics.median(runs)
  print(f'2. a step function with XLA {times[True]:.2f} ms a step, without '
        f'{times[False]:.2f}: {times[False] / times[True]:.2f}x')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--cpu', action='store_true',
                      help='a dry run on 2 logical CPUs (no GPU needed)')
  args = parser.parse_args()
  started = time.perf_counter()
  devices = _devices(args.cpu)
  trace_dir = tempfile.mkdtemp(prefix='gpu_check_trace_')
  agreed = mirrored_against_single(devices, trace_dir)
  xla_against_not(devices[0])
  host_syncs(trace_dir)
  print(f"4. on {devices[0]}: python -m benchmarks.graph_mode --model mlp --device "
        f"{devices[0]}; python -m benchmarks.estimator --model mlp --part steady "
        f"--device {devices[0]} (separate processes: each sets up its own devices)")
  print(f'done in {time.perf_counter() - started:.0f} s' +
        ('' if agreed else '; MIRRORED WEIGHTS DISAGREE'))
  if not agreed:
    raise SystemExit(1)


if __name__ == '__main__':
  main()
