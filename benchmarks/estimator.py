"""tfmon.estimator.Estimator.train against TF1's Estimator.train, same model_fn.

The same `model_fn` and `input_fn` are trained two ways:
  tfmon  `tfmon.estimator.Estimator(model_fn, config=...).train(input_fn, steps=N)`;
  tf1    what TF1's `Estimator.train` did, replayed in TF1's graph mode (still in
         TF 2.21; tensorflow_estimator no longer installs): inside `with
         tf.Graph().as_default():`, the global step, the input_fn's Dataset read
         through an initializable iterator (initialized by a hook), model_fn in
         TRAIN mode, a 'loss' summary if model_fn made none, a sharded Saver,
         and `tf.compat.v1.train.MonitoredTrainingSession` with Estimator's
         hooks in Estimator's order and its default session config, running
         `[train_op, loss]` until the StopAtStepHook stops it (`_train_tf1`).
Both carry Estimator's default duties: NanTensorHook every step, the loss
logged and global_step/sec counted every 100 steps, summaries every 100, a
CheckpointSaverHook (every 10**6 steps: saves at creation and at the end only,
so no timed window holds one), StopAtStepHook.

Models (synthetic MNIST-shaped data, `synthetic_mnist` of the example, batches
of 32 repeated from 1,024 examples, not shuffled):
  cnn  the layers tutorial's `cnn_model_fn` (examples/estimator_cnn_mnist.py),
       a step of ~12 ms. Its tf.compat.v1.layers are tf_keras' v1 layers in
       both variants: a TF1 script on TF 2.21 reaches them by setting
       TF_USE_LEGACY_KERAS=1 (then `import tensorflow` imports tf_keras), tfmon
       routes them itself at the first layer. So the tf1 short-run process
       sets it and the tfmon one does not; the steady-state process sets it
       for both (only building touches the layers);
  mlp  784-64-10 on `tf.compat.v1.get_variable` + matmul (no tf_keras): a step
       of ~0.3 ms, so Estimator's and the session's per-step Python shows.

Steady state: one process, alternating rounds (the order rotated each round);
each variant's `train` runs `--steps` timed steps after a warm-up (tracing,
pruning, TF's first-call optimization and the first recording step excluded),
timed by a hook of the caller's between its `after_run` calls (the same hook in
both, so it costs the same). Objects alive at the warm-up's end are frozen out
of the cycle collector, so each variant pays for its own garbage only.
Short run: each variant in a fresh process (`--worker`), timed from just before
the parent starts it to step 1 and to `train` returning after 300 steps (the
final checkpoint and session close included). Both processes import the same
modules (the example's `from tfmon import estimator` stands in for
tensorflow_estimator's import), then run the full garbage collection the
imports left due (see `_worker`). Ratios are medians of same-round ratios:
this box's speed moves between rounds.

  python -m benchmarks.estimator [--model cnn|mlp|both]
      [--part steady|short|both|premade|all] [--rounds N] [--steps N]
      [--device /gpu:0] [--tf215 PYTHON]
  --part premade (in all, the default)
      (examples/census_premade.py end to end in fresh processes; with --tf215, also
      on TF 2.15's tf.estimator through a stand-in `tfmon` package)
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tensorflow.core.protobuf import rewriter_config_pb2  # pylint: disable=g-import-not-at-top

from benchmarks import startup  # pylint: disable=g-import-not-at-top
from examples.estimator_cnn_mnist import cnn_model_fn, synthetic_mnist  # pylint: disable=g-import-not-at-top
from tfmon import estimator  # pylint: disable=g-import-not-at-top

v1 = tf.compat.v1

VARIANTS = ('tfmon', 'tf1')
SHORT_RUN_STEPS = 300
_BATCH = 32
_EXAMPLES = 1024
_NEVER = 10**6  # save_checkpoints_steps: only the saves at creation and at the end
_WARM_UP = {'cnn': 20, 'mlp': 200}
_DEFAULT_STEPS = {'cnn': 100, 'mlp': 2000}


# --- The model_fns and the input_fn, shared by the variants. ---


def mlp_model_fn(features, labels, mode):
  """A 784-64-10 MLP on get_variable and matmul: little compute a step."""
  x = features['x']
  w1 = v1.get_variable('w1', [784, 64])
  b1 = v1.get_variable('b1', [64], initializer=v1.zeros_initializer())
  w2 = v1.get_variable('w2', [64, 10])
  b2 = v1.get_variable('b2', [10], initializer=v1.zeros_initializer())
  logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits))
  train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
      loss, global_step=v1.train.get_global_step())
  return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)


_MODEL_FNS = {'cnn': cnn_model_fn, 'mlp': mlp_model_fn}


def input_fn():
  images, labels = synthetic_mnist(_EXAMPLES, seed=0)
  return tf.data.Dataset.from_tensor_slices(({'x': images}, labels)).repeat().batch(
      _BATCH)


# --- The variants. ---


_DEVICE = [None]  # --device: where both variants place the model_fn (None: TF's choice)


def _train_tfmon(model_fn, model_dir, steps, hooks):
  device = _DEVICE[0]
  config = estimator.RunConfig(save_checkpoints_steps=_NEVER,
                               device_fn=device and (lambda op: device))
  estimator.Estimator(model_fn, model_dir=model_dir, config=config).train(
      input_fn, hooks=hooks, steps=steps)


def _train_tf1(model_fn, model_dir, steps, hooks):
  """TF1's Estimator.train (tensorflow_estimator 2.15's `_train_model_default`
  and `_train_with_estimator_spec`, one worker, no distribution), with
  RunConfig's defaults but `save_checkpoints_steps`."""
  save_summary_steps = log_step_count_steps = 100
  with tf.Graph().as_default():
    global_step = v1.train.get_or_create_global_step()
    with tf.device('/cpu:0'):
      dataset = input_fn()
    iterator = v1.data.make_initializable_iterator(dataset)
    input_hooks = [_IteratorInitializerHook(iterator.initializer)]
    features, labels = iterator.get_next()
    with tf.compat.v1.device(_DEVICE[0]):  # RunConfig.device_fn's place
      spec = model_fn(features=features, labels=labels, mode=estimator.ModeKeys.TRAIN)
    if not any(s.op.name == 'loss' for s in v1.get_collection(v1.GraphKeys.SUMMARIES)):
      v1.summary.scalar('loss', spec.loss)
    v1.add_to_collection(v1.GraphKeys.LOSSES, spec.loss)
    worker_hooks = input_hooks + list(hooks) + [
        v1.train.StopAtStepHook(num_steps=steps),
        v1.train.NanTensorHook(spec.loss),
        v1.train.LoggingTensorHook({'loss': spec.loss, 'step': global_step},
                                   every_n_iter=log_step_count_steps),
    ] + list(spec.training_hooks)
    scaffold = spec.scaffold or v1.train.Scaffold()
    v1.add_to_collection(v1.GraphKeys.SAVERS, v1.train.Saver(
        sharded=True, max_to_keep=5, keep_checkpoint_every_n_hours=10000,
        defer_build=True, save_relative_paths=True))
    saver = v1.train.CheckpointSaverHook(model_dir, save_steps=_NEVER,
                                         scaffold=scaffold)
    # RunConfig's default session config.
    session_config = v1.ConfigProto(
        allow_soft_placement=True, graph_options=v1.GraphOptions(
            rewrite_options=rewriter_config_pb2.RewriterConfig(
                meta_optimizer_iterations=rewriter_config_pb2.RewriterConfig.ONE)))
    with v1.train.MonitoredTrainingSession(
        checkpoint_dir=model_dir, scaffold=scaffold, hooks=worker_hooks,
        chief_only_hooks=[saver] + list(spec.training_chief_hooks),
        save_checkpoint_secs=0, save_summaries_steps=save_summary_steps,
        config=session_config, log_step_count_steps=log_step_count_steps) as session:
      while not session.should_stop():
        session.run([spec.train_op, spec.loss])


class _IteratorInitializerHook(v1.train.SessionRunHook):
  """TF1 Estimator's `_DatasetInitializerHook`."""

  def __init__(self, initializer):
    self._initializer = initializer

  def after_create_session(self, session, coord):
    session.run(self._initializer)


_TRAIN = {'tfmon': _train_tfmon, 'tf1': _train_tf1}


class _Clock(v1.train.SessionRunHook):
  """Times runs `warm_up + 1` .. the last, between `after_run` calls; freezes
  the objects alive at the warm-up's end out of the cycle collector."""

  def __init__(self, warm_up):
    self._warm_up = warm_up

  def begin(self):
    self.runs = 0
    self.start = self.stop = None

  def after_run(self, run_context, run_values):
    self.runs += 1
    if self.runs == self._warm_up:
      gc.collect()
      gc.freeze()
      self.start = time.perf_counter()
    self.stop = time.perf_counter()

  def end(self, session):
    gc.unfreeze()

  def seconds_per_step(self):
    return (self.stop - self.start) / (self.runs - self._warm_up)


# --- Steady state, in this process. ---


def seconds_per_step(model, variant, steps):
  clock = _Clock(_WARM_UP[model])
  with tempfile.TemporaryDirectory() as model_dir:
    _TRAIN[variant](_MODEL_FNS[model], model_dir, _WARM_UP[model] + steps, [clock])
  return clock.seconds_per_step()


def measure_steady(model, rounds, steps):
  results = {v: [] for v in VARIANTS}
  for r in range(rounds):
    for variant in VARIANTS[r % 2:] + VARIANTS[:r % 2]:
      results[variant].append(seconds_per_step(model, variant, steps))
  return results


# --- Short runs, each in a fresh process. ---


def _report(milestone):
  print(json.dumps({'milestone': milestone, 'time': time.time()}), flush=True)


class _FirstRunReporter(v1.train.SessionRunHook):
  """Reports the milestone 'step 1' as the first run ends."""

  def begin(self):
    self._reported = False

  def after_run(self, run_context, run_values):
    if not self._reported:
      _report('step 1')
      self._reported = True


def _worker(model, variant, model_dir):
  # `import tensorflow` leaves a full collection due (0.19 s over ~345k
  # objects): whichever variant allocates the next few thousand objects pays it
  # (tfmon's first run did; TF1's MLP run ended 700 allocations short). Paid
  # here, in both, it is no variant's cost.
  gc.collect()
  _report('imported')
  _TRAIN[variant](_MODEL_FNS[model], model_dir, SHORT_RUN_STEPS,
                  [_FirstRunReporter()])
  _report(f'step {SHORT_RUN_STEPS}')


MILESTONES = ('imported', 'step 1', f'step {SHORT_RUN_STEPS}')


def run_short(model, variant):
  """Runs one variant in a fresh process; returns {milestone: seconds}."""
  env = dict(os.environ)
  env.pop('TF_USE_LEGACY_KERAS', None)
  # The TF1 script's switch for its v1 layers; it makes `import tensorflow`
  # import tf_keras (~0.4 s), as tfmon's routing does at the first layer.
  if variant == 'tf1' and model == 'cnn':
    env['TF_USE_LEGACY_KERAS'] = '1'
  return startup.run_worker('benchmarks.estimator', model, variant, MILESTONES, env)[0]


def measure_short(model, rounds):
  results = {v: [] for v in VARIANTS}
  for r in range(rounds):
    for variant in VARIANTS[r % 2:] + VARIANTS[:r % 2]:
      results[variant].append(run_short(model, variant))
  return results


def _median_ratio(numerators, denominators):
  return statistics.median(a / b for a, b in zip(numerators, denominators))


_CENSUS = os.path.join(os.path.dirname(__file__), '..', 'examples', 'census_premade.py')

# What makes the census example run on TF 2.15's tf.estimator: `tfmon.estimator`
# as a stand-in package naming TF's, and the Keras 2 optimizers TF 2.15's premade
# estimators took (its Keras 3-era `tf.keras.optimizers.Adagrad` is Keras 2.15's).
_TF215_SHIM = {
    'tfmon/__init__.py': 'import tensorflow as tf\nestimator = tf.estimator\n',
    'tfmon/estimator/__init__.py': (
        'import tensorflow as tf\n'
        "globals().update({k: getattr(tf.estimator, k) for k in dir(tf.estimator) "
        "if not k.startswith('__')})\n"),
}


def measure_premade(rounds, tf215_python=None):
  """Seconds from process start to the census example's end (train, evaluate
  twice, predict, export), in fresh processes: tfmon's, and TF 2.15's with
  `tf215_python` (a venv with tensorflow-cpu 2.15 and tensorflow-estimator)."""
  variants = {'tfmon': ([sys.executable, _CENSUS], None)}
  if tf215_python:
    shim = tempfile.mkdtemp()
    for path, text in _TF215_SHIM.items():
      os.makedirs(os.path.join(shim, os.path.dirname(path)), exist_ok=True)
      with open(os.path.join(shim, path), 'w') as f:
        f.write(text)
    with open(_CENSUS) as f:
      source = f.read().replace('tf.keras.optimizers.', 'tf.keras.optimizers.legacy.')
    script = os.path.join(shim, 'census_premade.py')
    with open(script, 'w') as f:
      f.write(source)
    variants['tf215'] = ([tf215_python, script], shim)
  results = {name: [] for name in variants}
  for r in range(rounds):
    names = list(variants)[r % len(variants):] + list(variants)[:r % len(variants)]
    for name in names:
      command, path = variants[name]
      env = dict(os.environ, PYTHONPATH=path) if path else None
      start = time.perf_counter()
      subprocess.run(command + ['--model_dir', tempfile.mkdtemp()], check=True,
                     env=env, capture_output=True)
      results[name].append(time.perf_counter() - start)
  return results


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--model', choices=['cnn', 'mlp', 'both'], default='both')
  parser.add_argument('--part', choices=['steady', 'short', 'both', 'premade', 'all'],
                      default='all', help="both: steady and short; all: with premade")
  parser.add_argument('--tf215', help='premade: a TF 2.15 Python (tensorflow-cpu '
                      '2.15.1, tensorflow-estimator 2.15.0) to run the example on too')
  parser.add_argument('--rounds', type=int, default=4)
  parser.add_argument('--steps', type=int, default=None,
                      help='steady-state steps timed per round (default: '
                      '100 cnn, 2000 mlp)')
  parser.add_argument('--device', default=None,
                      help="where model_fns run, e.g. '/gpu:0' (default: TF's choice)")
  parser.add_argument('--worker', help=argparse.SUPPRESS)
  parser.add_argument('--dir', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.device:  # the short run's worker processes take it from there
    os.environ['TFMON_BENCHMARK_DEVICE'] = args.device
  _DEVICE[0] = os.environ.get('TFMON_BENCHMARK_DEVICE')
  if args.worker:
    _worker(args.model, args.worker, args.dir)
    return
  if args.part in ('premade', 'all'):
    results = measure_premade(args.rounds, args.tf215)
    print(f'census premade example end to end, seconds from process start '
          f'({args.rounds} rounds): ' + ', '.join(
              f'{name} {statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})'
              for name, times in results.items()))
    if 'tf215' in results:
      print(f'  tfmon time / tf215 time: {_median_ratio(results["tfmon"], results["tf215"]):.3f}'
            ' (target <= 1.0)')
    if args.part == 'premade':
      return
  # The tf1 variant's v1 layers in this process (see the docstring).
  os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
  # TF1's StepCounterHook warns that the global step did not move when its read
  # raced the increment in the same run (TF1's graph mode, both variants' hooks
  # log on this logger alike).
  tf.get_logger().setLevel('ERROR')
  models = ['cnn', 'mlp'] if args.model == 'both' else [args.model]
  for model in models:
    if args.part in ('steady', 'both', 'all'):
      steps = args.steps or _DEFAULT_STEPS[model]
      results = measure_steady(model, args.rounds, steps)
      print(f'{model} steady state: {args.rounds} rounds of {steps} steps after '
            f'{_WARM_UP[model]} warm-up, ms a step (median)')
      for variant, times in results.items():
        print(f'  {variant:6s} {1e3 * statistics.median(times):8.3f}   rounds: ' +
              ' '.join(f'{1e3 * t:.3f}' for t in times))
      print(f'  tfmon time / tf1 time: {_median_ratio(results["tfmon"], results["tf1"]):.3f}'
            ' (target <= 1.0)')
    if args.part in ('short', 'both', 'all'):
      results = measure_short(model, args.rounds)
      print(f'{model} short run: seconds from process start, median of {args.rounds} rounds')
      print('  variant ' + ''.join(f'{m:<12s}' for m in MILESTONES))
      for variant, runs in results.items():
        print(f'  {variant:7s} ' + ''.join(
            f'{statistics.median(run[m] for run in runs):<12.2f}' for m in MILESTONES))
      print('  tfmon time / tf1 time: ' + ', '.join(
          f'{m}: {_median_ratio([r[m] for r in results["tfmon"]], [r[m] for r in results["tf1"]]):.3f}'
          for m in MILESTONES) + ' (target <= 1.0)')


if __name__ == '__main__':
  main()
