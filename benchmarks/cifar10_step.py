"""Per step, in one process: the CIFAR-10 tutorial's step under tfmon and TF1.

    python -m benchmarks.cifar10_step [--rounds 12] [--steps 20]

Tells where a per-step difference in `benchmarks.startup --model cifar10`
comes from. The tutorial's model, batch and optimizer (`benchmarks.startup`),
each variant with sessions of its own, run interleaved (order rotated every
round) after a warm-up; a round runs `--steps` steps of each:
  tfmon        MonitoredTrainingSession defaults, NanTensorHook and a v1 hook
               fetching the loss every run (the tutorial's `_LoggerHook`);
  tf1          the same in TF1 graph mode: a tf.Graph, v1 MonitoredTrainingSession;
  plain        the step as a plain `tf.function`, no session or hooks;
  and each again without the step's summaries (`-nosum`; plain has none).
Prints each variant's median ms a step and the median of same-round ratios to
tf1 (to tf1-nosum for the -nosum variants and plain).
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf

import tfmon
from benchmarks import startup

v1 = tf.compat.v1


class _NoSummaries:
  """Stands in for tf.compat.v1.summary: the step without its summaries."""

  @staticmethod
  def histogram(*unused_args, **unused_kwargs):
    pass

  scalar = histogram


class _FetchLoss(v1.train.SessionRunHook):
  """The tutorial's _LoggerHook, less its logging: the loss every run."""

  def __init__(self, loss):
    self._loss = loss

  def before_run(self, run_context):
    return v1.train.SessionRunArgs(self._loss)


def _tfmon(summary):
  # Each tfmon variant its own global step, as in a process of its own.
  v1.get_default_graph().clear_collection(v1.GraphKeys.GLOBAL_STEP)
  step, model = startup.cifar_tutorial_step(tf, np, summary,
                                            tfmon.train.create_global_step())
  sess = tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=tempfile.mkdtemp(), checkpoint={'variables': model.variables},
      hooks=[tfmon.train.NanTensorHook('loss'), _FetchLoss('loss')])
  fetch = tfmon.train.op(step)
  return lambda: sess.run(fetch)


def _tf1(summary):
  graph = tf.Graph()
  with graph.as_default():
    loss, train_op = startup.cifar_tutorial_graph(tf, np, summary)
    sess = v1.train.MonitoredTrainingSession(
        checkpoint_dir=tempfile.mkdtemp(),
        hooks=[v1.train.NanTensorHook(loss), _FetchLoss(loss)])

  def run():
    with graph.as_default():
      sess.run(train_op)

  return run


def _plain():
  step, _ = startup.cifar_tutorial_step(tf, np, _NoSummaries, tf.Variable(0, tf.int64))
  step = tf.function(step)
  return lambda: step()['loss'].numpy()


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=12)
  parser.add_argument('--steps', type=int, default=20)
  args = parser.parse_args()
  variants = {'tfmon': _tfmon(v1.summary), 'tf1': _tf1(v1.summary),
              'tfmon-nosum': _tfmon(_NoSummaries), 'tf1-nosum': _tf1(_NoSummaries),
              'plain': _plain()}
  baselines = {'tfmon': 'tf1', 'tfmon-nosum': 'tf1-nosum', 'plain': 'tf1-nosum'}
  names = list(variants)
  for _ in range(5):  # traces, first calls, the first recording step
    for name in names:
      variants[name]()
  times = {name: [] for name in names}
  for round_index in range(args.rounds):
    shift = round_index % len(names)
    for name in names[shift:] + names[:shift]:
      run = variants[name]
      start = time.perf_counter()
      for _ in range(args.steps):
        run()
      times[name].append((time.perf_counter() - start) / args.steps * 1000)
  for name in names:
    line = f'  {name:12s} {statistics.median(times[name]):6.1f} ms a step'
    if name in baselines:
      base = baselines[name]
      ratio = statistics.median(a / b for a, b in zip(times[name], times[base]))
      line += f'   / {base}: {ratio:.3f}'
    print(line)


if __name__ == '__main__':
  main()
