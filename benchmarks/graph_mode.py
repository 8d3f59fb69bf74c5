"""TF1 graph code under tfmon.Graph against TF1's own graph mode, per step.

The same TF1 script runs twice in this process, in alternating rounds: once
inside `with tf.Graph().as_default():` with `tf.compat.v1.train.
MonitoredTrainingSession` (TF1's graph mode, still in TF 2.21), once inside
`with tfmon.Graph().as_default():` with `tfmon.train.MonitoredTrainingSession`
(the port: a rename). Both carry a TF1 job's duties: MonitoredTrainingSession's
defaults (summaries and the step rate every 100 steps, a checkpoint every 500),
TF's own StopAtStepHook, NanTensorHook and LoggingTensorHook (every 100).

Workloads:
  mlp      64-64-10 MLP, batches of 32 fed through placeholders (numpy float64,
           as numpy makes them: both convert to the placeholder's float32);
  hooks    the mlp with more of TF's own hooks, as TF1 scripts carry them: a v1
           metric updated every run and logged by a LoggingTensorHook, a
           subclass of LoggingTensorHook overriding `after_run` (called every
           run), and a hook of the script's own writing `merge_all()` through a
           FileWriter every 100 runs;
  cifar10  TensorFlow's CIFAR-10 tutorial graph (benchmarks/startup.py), input
           from a tf.data one-shot iterator, v1 summaries.

  xla      the cifar10 graph with XLA's auto-clustering: `tf1-xla` (TF1's
           ConfigProto global_jit_level=ON_1) and `tfmon-xla` (jit_compile=True)
           against `tf1` without XLA, each timed from its first run (XLA's
           compilation included) over --steps (default 300) steps. On CPU this
           needs TF_XLA_FLAGS=--tf_xla_cpu_global_jit before TensorFlow starts,
           which `--model xla` sets.

`tfmon-hooks` is the port with tfmon's hooks, whose runs between due steps
fetch `train_op` alone; `tfmon-fused` (cifar10) is that with `steps_per_loop=100`.
Each round times `--steps` steps after a warm-up run of each variant (tracing,
pruning and TF's first-call optimization excluded); ratios are medians of
same-round ratios, since this box's speed moves between rounds. The idle-hooks
line is tfmon with 50 idle tfmon hooks against tfmon with one, same rounds.

  python -m benchmarks.graph_mode [--model mlp|hooks|cifar10|xla|all] [--device /gpu:0] [--rounds N] [--steps N]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
if 'xla' in sys.argv:  # read once, when TensorFlow registers the CPU device
  os.environ.setdefault('TF_XLA_FLAGS', '--tf_xla_cpu_global_jit')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import tfmon  # pylint: disable=g-import-not-at-top
from benchmarks import startup  # pylint: disable=g-import-not-at-top

v1 = tf.compat.v1


def _mlp():
  """A TF1 MLP on placeholders; returns (loss, train_op, feed_dict)."""
  global_step = v1.train.get_or_create_global_step()
  x = v1.placeholder(tf.float32, [None, 64], name='x')
  y = v1.placeholder(tf.int64, [None], name='y')
  w1 = v1.get_variable('w1', [64, 64])
  w2 = v1.get_variable('w2', [64, 10])
  logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=y, logits=logits), name='loss')
  v1.summary.scalar('loss', loss)
  train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
      loss, global_step=global_step)
  rng = np.random.default_rng(0)
  return loss, train_op, {x: rng.normal(size=(32, 64)), y: rng.integers(0, 10, 32)}


def _cifar10():
  loss, train_op = startup.cifar_tutorial_graph(tf, np, v1.summary)
  return loss, train_op, None


_MODELS = {'mlp': _mlp, 'cifar10': _cifar10, 'hooks': _mlp}


class _SubclassedLoggingHook(v1.train.LoggingTensorHook):
  """A TF1 script's subclass of TF's hook: overrides after_run, so every run."""

  def after_run(self, run_context, run_values):
    super().after_run(run_context, run_values)
    self.runs = getattr(self, 'runs', 0) + 1


class _FileWriterHook(v1.train.SessionRunHook):
  """A TF1 script's own hook: `merge_all()` written by a FileWriter every 100 runs."""

  def __init__(self, directory):
    self._directory = directory

  def begin(self):
    self._merged = v1.summary.merge_all()
    self._writer = v1.summary.FileWriterCache.get(self._directory)
    self._global_step = v1.train.get_global_step()
    self._runs = 0

  def before_run(self, run_context):
    self._runs += 1
    if self._runs % 100 == 0:
      return v1.train.SessionRunArgs([self._merged, self._global_step])
    return None

  def after_run(self, run_context, run_values):
    if run_values.results:
      self._writer.add_summary(*run_values.results)


def _tf_hooks(loss, directory):
  """The 'hooks' workload's hooks, TF's classes in both variants, and the v1
  metric whose update op the training run fetches."""
  labels = v1.get_default_graph().get_tensor_by_name('y:0')
  logits = v1.get_default_graph().get_tensor_by_name('MatMul_1:0')
  accuracy, update = v1.metrics.accuracy(labels, tf.argmax(logits, 1))
  v1.summary.scalar('accuracy', accuracy)
  hooks = [v1.train.LoggingTensorHook({'accuracy': accuracy}, every_n_iter=100),
           _SubclassedLoggingHook({'loss': loss}, every_n_iter=100),
           _FileWriterHook(directory)]
  return hooks, update


class _IdleHook(tfmon.train.LoggingTensorHook):
  """A tfmon hook due far in the future: what an idle hook costs."""

  def __init__(self, loss):
    super().__init__({'loss': loss}, every_n_iter=10**9)


def _seconds_per_step(model, variant, steps, idle_hooks=0):
  """Builds `model` in a fresh graph of `variant`, warms up, times `steps` steps."""
  graph, train = ((tfmon.Graph, tfmon.train) if variant.startswith('tfmon')
                  else (tf.Graph, v1.train))
  fused = variant == 'tfmon-fused'
  # These variants' scripts say tfmon.train.X for their hooks too (the port's
  # rename): tfmon's hooks tell the session when they are due, TF's see every
  # step (StopAtStepHook fetches the global step with each run).
  hook_module = tfmon.train if variant in ('tfmon-fused', 'tfmon-hooks') else v1.train
  with graph().as_default(), tf.device(_DEVICE[0]):
    loss, train_op, feed_dict = _MODELS[model]()
    if fused and feed_dict is not None:
      return float('nan')  # fed runs do not fuse
    hooks = [hook_module.StopAtStepHook(last_step=steps + 2),
             hook_module.NanTensorHook(loss),
             hook_module.LoggingTensorHook({'loss': loss}, every_n_iter=100)]
    hooks += [_IdleHook(loss) for _ in range(idle_hooks)]
    directory = tempfile.mkdtemp()
    if model == 'hooks':
      more_hooks, update = _tf_hooks(loss, directory)
      hooks += more_hooks
      train_op = tf.group(train_op, update)
    with train.MonitoredTrainingSession(
        checkpoint_dir=directory, hooks=hooks, save_checkpoint_steps=500,
        save_summaries_steps=100, log_step_count_steps=100,
        **({'steps_per_loop': 100} if fused else {})) as sess:
      sess.run(train_op, feed_dict=feed_dict)  # trace, prune, first call
      sess.run(train_op, feed_dict=feed_dict)  # the non-recording function's
      start = time.perf_counter()
      count = 0
      while not sess.should_stop():
        sess.run(train_op, feed_dict=feed_dict)
        count += 1
      return (time.perf_counter() - start) / count


_DEVICE = [None]  # --device: where both variants build the model (None: TF's choice)


def _xla_seconds(variant, steps):
  """Seconds from the first run to the end of `steps` steps of the cifar10
  graph: `tf1`, `tf1-xla` (ConfigProto global_jit_level=ON_1) or `tfmon-xla`
  (jit_compile=True), with MonitoredTrainingSession's default duties."""
  tfmon_variant = variant.startswith('tfmon')
  graph, train = (tfmon.Graph, tfmon.train) if tfmon_variant else (tf.Graph, v1.train)
  with graph().as_default(), tf.device(_DEVICE[0]):
    _, train_op = startup.cifar_tutorial_graph(tf, np, v1.summary)
    config = v1.ConfigProto()
    if variant == 'tf1-xla':
      config.graph_options.optimizer_options.global_jit_level = v1.OptimizerOptions.ON_1
    with train.MonitoredTrainingSession(
        checkpoint_dir=tempfile.mkdtemp(), config=config,
        hooks=[train.StopAtStepHook(last_step=steps)],
        **({'jit_compile': True} if tfmon_variant else {})) as sess:
      start = time.perf_counter()
      while not sess.should_stop():
        sess.run(train_op)
      return time.perf_counter() - start


def measure_xla(rounds, steps):
  variants = ('tf1', 'tf1-xla', 'tfmon-xla')
  results = {v: [] for v in variants}
  for r in range(rounds):
    for variant in variants[r % 3:] + variants[:r % 3]:
      results[variant].append(_xla_seconds(variant, steps))
  return results


def measure(model, rounds, steps):
  variants = ('tfmon', 'tf1', 'tfmon-hooks', 'tfmon-50-idle', 'tfmon-1-idle') + (
      ('tfmon-fused',) if model == 'cifar10' else ())
  if model == 'hooks':
    variants = ('tfmon', 'tf1')
  results = {v: [] for v in variants}
  for r in range(rounds):
    order = variants[r % len(variants):] + variants[:r % len(variants)]
    for variant in order:
      idle = {'tfmon-50-idle': 50, 'tfmon-1-idle': 1}.get(variant, 0)
      results[variant].append(_seconds_per_step(model, variant, steps, idle))
  return results


def _ratio(results, a, b):
  return statistics.median(x / y for x, y in zip(results[a], results[b]))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--model', default='all',
                      choices=['mlp', 'cifar10', 'hooks', 'xla', 'all'])
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=None,
                      help='steps timed per round (default: 2000 mlp, 60 cifar10)')
  parser.add_argument('--device', default=None,
                      help="where to build the models, e.g. '/gpu:0' (default: TF's choice)")
  args = parser.parse_args()
  _DEVICE[0] = args.device
  if args.model == 'xla':
    steps = args.steps or 300
    results = measure_xla(args.rounds, steps)
    print(f'xla: {args.rounds} rounds of {steps} cifar10 steps from the first run, '
          's (median)')
    for variant, times in results.items():
      print(f'  {variant:15s} {statistics.median(times):8.2f}')
    print(f'  TF1 without XLA time / tfmon-xla time (speed-up): '
          f'{_ratio(results, "tf1", "tfmon-xla"):.3f} (goal >= 1.1); TF1\'s own '
          f'XLA: {_ratio(results, "tf1", "tf1-xla"):.3f}')
    return
  models = ['mlp', 'hooks', 'cifar10'] if args.model == 'all' else [args.model]
  for model in models:
    steps = args.steps or {'mlp': 2000, 'hooks': 2000, 'cifar10': 60}[model]
    results = measure(model, args.rounds, steps)
    print(f'{model}: {args.rounds} rounds of {steps} steps, ms a step (median)')
    for variant, times in results.items():
      print(f'  {variant:15s} {1e3 * statistics.median(times):8.3f}')
    print(f'  TF1 throughput / tfmon throughput, i.e. tfmon time / TF1 time: '
          f'{_ratio(results, "tfmon", "tf1"):.3f} (target <= 1.0)')
    if model == 'hooks':
      continue
    print(f'  50 idle hooks: tfmon-1-idle time / tfmon-50-idle time: '
          f'{_ratio(results, "tfmon-1-idle", "tfmon-50-idle"):.3f} (target >= 0.95)')
    print(f'  tfmon hooks (runs of train_op alone): tfmon-hooks time / TF1 time: '
          f'{_ratio(results, "tfmon-hooks", "tf1"):.3f} (target <= 1.0)')
    if 'tfmon-fused' in results:
      print(f'  steps_per_loop=100 (tfmon hooks): tfmon-fused time / TF1 time: '
            f'{_ratio(results, "tfmon-fused", "tf1"):.3f} (target < 1.0)')


if __name__ == '__main__':
  main()
