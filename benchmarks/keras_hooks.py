"""Per-batch cost of tfmon.keras.HookCallback inside Keras `fit` (issue 18).

    python -m benchmarks.keras_hooks [--rounds 21] [--steps 500]

The MLP of `benchmarks.overhead` (32 -> 64 -> 10, batch 32, SGD), one fixed
batch repeated, steps_per_execution=1, verbose=0. Variants, each a model of
its own, run interleaved in one process (order rotated every round) after a
warm-up; each round is one `fit` of `--steps` steps:
  (a) fit, no callbacks
  (b) fit + an idle HookCallback: CheckpointSaverHook, LoggingTensorHook and
      StopAtStepHook, none due in the timed steps (every 10**9 steps)
  (c) fit + HookCallback([]) (the callback's own fixed cost)
Prints steps/s per variant (median) and the median of same-round ratios
(b)/(a) and (c)/(a), by wall time and by this process's CPU time (the latter
is steadier when other processes load the machine). Target: (b)/(a) >= 0.95 (an idle HookCallback costs at
most 5% a batch).
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # pylint: disable=g-import-not-at-top
import numpy as np
import tensorflow as tf

import tfmon
import tfmon.keras
from benchmarks.overhead import long_lived_objects_frozen, mlp_model

_BATCH = 32
_FAR = 10**9


def _dataset(steps):
  rng = np.random.default_rng(0)
  features = rng.normal(size=(_BATCH, 32)).astype(np.float32)
  labels = rng.integers(0, 10, size=_BATCH)
  return tf.data.Dataset.from_tensors((features, labels)).repeat(steps)


def _compiled():
  model = mlp_model()
  model.compile(keras.optimizers.SGD(0.01),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def _variants(logdir):
  def plain():
    model = _compiled()
    return model, lambda: []

  def idle():
    model = _compiled()

    def callbacks():
      return [tfmon.keras.HookCallback([
          tfmon.train.CheckpointSaverHook(
              logdir, save_steps=_FAR,
              saver={'model': model, 'optimizer': model.optimizer}),
          tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=_FAR),
          tfmon.train.StopAtStepHook(last_step=_FAR)])]

    return model, callbacks

  def empty():
    model = _compiled()
    return model, lambda: [tfmon.keras.HookCallback([])]

  return {'(a) fit, no callbacks': plain(),
          '(b) fit + idle HookCallback (3 hooks)': idle(),
          '(c) fit + HookCallback([])': empty()}


def _fit(model, callbacks, steps):
  """Returns `(steps/s of wall time, steps/s of this process's CPU time)`."""
  dataset = _dataset(steps)
  start, start_cpu = time.perf_counter(), time.process_time()
  model.fit(dataset, epochs=1, verbose=0, callbacks=callbacks())
  return (steps / (time.perf_counter() - start),
          steps / (time.process_time() - start_cpu))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=21)
  parser.add_argument('--steps', type=int, default=500)
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as logdir:
    variants = _variants(logdir)
    for model, callbacks in variants.values():  # trace, build, warm up
      _fit(model, callbacks, 200)
    names = list(variants)
    rates = {name: [] for name in names}
    with long_lived_objects_frozen():
      for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
          model, callbacks = variants[name]
          rates[name].append(_fit(model, callbacks, args.steps))
  base = names[0]
  for clock, i in (('wall', 0), ('CPU', 1)):
    for name in names:
      print(f'{name}: {statistics.median(r[i] for r in rates[name]):,.0f} '
            f'steps/s of {clock} time')
    for name in names[1:]:
      ratios = [x[i] / y[i] for x, y in zip(rates[name], rates[base])]
      print(f'{name} / (a), {clock} time, median of same-round ratios: '
            f'{statistics.median(ratios):.3f} (rounds: '
            f'{", ".join(f"{x:.3f}" for x in ratios)})')
  print('target (b) / (a) >= 0.95')


if __name__ == '__main__':
  main()
