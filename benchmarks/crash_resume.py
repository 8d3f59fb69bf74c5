r"""Crash-resume exactness: SIGKILL a training job at random moments, restart it
each time, and check that its final variables are bit-identical to a run that
was never interrupted.

The job is the CIFAR-10 example's model (tfmon.examples.cifar10.inference) on a
small synthetic CIFAR-shaped set, trained by MonitoredTrainingSession with
deterministic ops (`tf.config.experimental.enable_op_determinism()`) and the
tf.data iterator (shuffle buffer, position, prefetched batches) in the
checkpoint. Augmentation is stateless, seeded by each example's index: the
state of a stateful random op inside `Dataset.map` is not checkpointed, so a
resumed pipeline would crop differently.

Kills land at random: at a random moment after a random number of steps, some
while the job is still starting (restoring), and some while it saves a
checkpoint (the CheckpointSaverListener's `before_save` line, then 0-20 ms).
Each restart must resume at a checkpoint no more than `--save-steps` behind the
last step the killed job reported; the steps repeated per kill are printed.

  python -m benchmarks.crash_resume [--kills 12] [--steps 80] [--save-steps 5]
      [--seed 0] [--dir DIR]

Exits 1 if the variables differ or a kill repeated more steps than allowed.
The harness itself imports no TensorFlow; each job is a process of its own
(`--worker`).
"""

import argparse
import dataclasses
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FINAL = 'final_variables.npz'


# ---------------------------------------------------------------- the worker

def _worker(directory, steps, save_steps, batch_size):
  """Trains until global step `steps`; prints START/STEP/SAVING/SAVED lines."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tfmon  # pylint: disable=g-import-not-at-top
  from tfmon.examples import cifar10  # pylint: disable=g-import-not-at-top
  from tfmon.examples import cifar10_input  # pylint: disable=g-import-not-at-top

  tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(0)
  data = cifar10_input.synthetic(num_train=256, num_test=8, seed=0)
  images, labels = data.train
  size = cifar10_input.CROP_SIZE

  def augment(index, example):
    image, label = example
    seed = tf.stack([tf.cast(index, tf.int32), 0])  # stateless: same crop on resume
    image = tf.image.stateless_random_crop(tf.cast(image, tf.float32),
                                           [size, size, 3], seed=seed)
    image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
    return tf.image.per_image_standardization(image), label

  dataset = (tf.data.Dataset.from_tensor_slices((images, labels))
             .shuffle(len(labels), seed=0).repeat().enumerate()
             .map(augment, num_parallel_calls=2).batch(batch_size)
             .prefetch(2))
  batches = iter(dataset)
  global_step = tfmon.train.get_or_create_global_step()
  model = cifar10.inference()
  optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
  optimizer.build(model.trainable_variables)
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def train_op():
    images, labels = next(batches)
    with tf.GradientTape() as tape:
      loss = loss_fn(labels, model(images, training=True)) + tf.add_n(model.losses)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    global_step.assign_add(1)

  class SaveReporter(tfmon.train.CheckpointSaverListener):

    def before_save(self, session, global_step_value):
      print('SAVING', global_step_value, flush=True)

    def after_save(self, session, global_step_value):
      print('SAVED', global_step_value, flush=True)

  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=directory,
      checkpoint={'model': model, 'optimizer': optimizer, 'input': batches},
      save_checkpoint_steps=save_steps, save_summaries_steps=None,
      log_step_count_steps=None,
      hooks=[tfmon.train.StopAtStepHook(last_step=steps)],
      chief_only_hooks=[]) as sess:
    # The creation-time save (step 0, first start only) has no listener.
    print('START', int(global_step.numpy()), flush=True)
    saver = [h for h in sess._hooks  # pylint: disable=protected-access
             if isinstance(h, tfmon.train.CheckpointSaverHook)][0]
    saver._listeners.append(SaveReporter())  # pylint: disable=protected-access
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_op))
      print('STEP', int(global_step.numpy()), flush=True)
  values = {f'{i:03d} {v.path}': v.numpy()
            for i, v in enumerate(model.variables + optimizer.variables)}
  temp = os.path.join(directory, 'final.tmp.npz')
  np.savez(temp, **values)
  os.replace(temp, os.path.join(directory, _FINAL))
  print('DONE', int(global_step.numpy()), flush=True)


# ---------------------------------------------------------------- the harness

@dataclasses.dataclass
class Kill:
  kind: str            # 'startup', 'random' or 'save'
  last_step_seen: int  # the last STEP the killed job printed (or its START)
  saving: int = None   # the step it was saving, for kind 'save'
  resumed_at: int = None  # the START of the next job

  @property
  def steps_repeated(self):
    return self.last_step_seen - self.resumed_at


class _Job:
  """A worker process whose lines are read by a thread as they come."""

  def __init__(self, directory, args):
    self.started = time.monotonic()
    self.process = subprocess.Popen(
        [sys.executable, '-m', 'benchmarks.crash_resume', '--worker',
         '--dir', directory, '--steps', str(args.steps),
         '--save-steps', str(args.save_steps), '--batch-size', str(args.batch_size)],
        cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    self.lines = []
    self.changed = threading.Condition()
    self.stderr = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()
    threading.Thread(target=lambda: self.stderr.extend(self.process.stderr),
                     daemon=True).start()

  def _read(self):
    for line in self.process.stdout:
      with self.changed:
        self.lines.append(line.split())
        self.changed.notify_all()
    with self.changed:
      self.lines.append(['EOF'])
      self.changed.notify_all()

  def wait_for(self, predicate, timeout):
    """Waits until a line satisfies `predicate` (returns it) or EOF (None)."""
    deadline = time.monotonic() + timeout
    seen = 0
    with self.changed:
      while True:
        for line in self.lines[seen:]:
          if line[0] == 'EOF':
            return None
          if predicate(line):
            return line
        seen = len(self.lines)
        left = deadline - time.monotonic()
        if left <= 0:
          raise TimeoutError(f'no expected line within {timeout} s; got '
                             f'{self.lines[-5:]}; stderr: {"".join(self.stderr)[-2000:]}')
        self.changed.wait(left)

  def last_step(self):
    with self.changed:
      steps = [int(line[1]) for line in self.lines if line[0] in ('STEP', 'START')]
    return steps[-1] if steps else None

  def start_step(self):
    with self.changed:
      return next((int(line[1]) for line in self.lines if line[0] == 'START'), None)

  def kill(self):
    self.process.send_signal(signal.SIGKILL)
    self.process.wait()
    self._reader.join()  # every line it printed before dying is read

  def finish(self, timeout):
    code = self.process.wait(timeout)
    if code != 0:
      raise RuntimeError(f'job exited with {code}: {"".join(self.stderr)[-3000:]}')


def _run_uninterrupted(directory, args):
  """Returns the seconds the job took to start, and a step's seconds."""
  job = _Job(directory, args)
  job.wait_for(lambda line: line[0] == 'START', args.timeout)
  start = time.monotonic() - job.started
  job.finish(args.timeout)
  return start, (time.monotonic() - job.started - start) / args.steps


def _run_with_kills(directory, args, rng, startup_secs, step_secs, log):
  kills = []
  kinds = ['save'] * max(1, args.kills // 3) + ['startup'] * (args.kills // 6)
  kinds += ['random'] * (args.kills - len(kinds))
  rng.shuffle(kinds)
  last_start = 0  # the step the last job that got that far started from
  while True:
    job = _Job(directory, args)
    kind = kinds[len(kills)] if len(kills) < len(kinds) else None
    if kind == 'startup':  # while importing, building and restoring
      time.sleep(rng.uniform(0.2, 0.9) * startup_secs)
      if job.start_step() is None:
        job.kill()
        kills.append(Kill('startup', last_start))
        log(f'kill {len(kills)} (startup): before the job started')
        continue
      kind = 'random'  # it started faster than the first job
    start = int(job.wait_for(lambda line: line[0] == 'START', args.timeout)[1])
    last_start = start
    for kill in kills:
      if kill.resumed_at is None:
        kill.resumed_at = start
        log(f'  restart: resumed at step {start} ({kill.steps_repeated} steps '
            'repeated)')
    if kind is None:
      job.finish(args.timeout)
      return kills
    if kind == 'save':
      line = job.wait_for(lambda line: line[0] in ('SAVING', 'DONE'), args.timeout)
      if line is not None and line[0] == 'SAVING':
        time.sleep(rng.uniform(0, 0.02))  # a save takes ~10-60 ms
        job.kill()
        # The step saved ran; its STEP line comes after the save.
        kills.append(Kill('save', int(line[1]), saving=int(line[1])))
        log(f'kill {len(kills)} (save, saving step {line[1]}): after step {line[1]}')
        continue
      kind = 'random'
    # 'random': a random moment within the next two checkpoint intervals,
    # never after the last step (a kill then would cost nothing).
    target = min(start + rng.randint(1, 2 * args.save_steps), args.steps - 1)
    if target > start:
      job.wait_for(lambda line: line[0] == 'STEP' and int(line[1]) >= target,
                   args.timeout)
      time.sleep(rng.uniform(0, step_secs))  # somewhere in the next step
    job.kill()
    kills.append(Kill('random', job.last_step()))
    log(f'kill {len(kills)} (random): after step {kills[-1].last_step_seen}')


def _compare(reference, resumed):
  with np.load(reference) as a, np.load(resumed) as b:
    if sorted(a.files) != sorted(b.files):
      return [f'variables differ: {sorted(set(a.files) ^ set(b.files))}']
    return [name for name in a.files
            if a[name].dtype != b[name].dtype or a[name].shape != b[name].shape or
            a[name].tobytes() != b[name].tobytes()]


def run(args, log=print):
  """Runs the experiment; returns (kills, names of variables that differ)."""
  root = args.dir or tempfile.mkdtemp(prefix='crash_resume_')
  reference, resumed = os.path.join(root, 'reference'), os.path.join(root, 'killed')
  for directory in (reference, resumed):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
  rng = random.Random(args.seed)
  log(f'Reference: {args.steps} steps uninterrupted, in {reference}')
  startup_secs, step_secs = _run_uninterrupted(reference, args)
  log(f'  started in {startup_secs:.1f} s, then {step_secs * 1000:.0f} ms a step '
      '(saves included)')
  log(f'Killed run: {args.kills} SIGKILLs, in {resumed}')
  kills = _run_with_kills(resumed, args, rng, startup_secs, step_secs, log)
  differing = _compare(os.path.join(reference, _FINAL), os.path.join(resumed, _FINAL))
  return kills, differing


def _report(kills, differing, args, log=print):
  repeated = [kill.steps_repeated for kill in kills]
  too_many = [kill for kill in kills if kill.steps_repeated > args.save_steps]
  log('')
  log(f'Kills survived: {len(kills)} ({sum(k.kind == "save" for k in kills)} during '
      f'a save, {sum(k.kind == "startup" for k in kills)} while starting, '
      f'{sum(k.kind == "random" for k in kills)} at random moments)')
  log(f'Steps repeated per kill: {repeated}; mean {np.mean(repeated):.1f}, max '
      f'{max(repeated)} (allowed: {args.save_steps}, the checkpoint interval)')
  log('Final variables bit-identical to the uninterrupted run: '
      f'{"yes" if not differing else "NO: " + ", ".join(differing[:5])}')
  return not differing and not too_many


def main(argv=None, log=print):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--kills', type=int, default=12)
  parser.add_argument('--steps', type=int, default=80)
  parser.add_argument('--save-steps', type=int, default=5)
  parser.add_argument('--batch-size', type=int, default=16)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--dir', default=None)
  parser.add_argument('--timeout', type=float, default=300)
  parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    return _worker(args.dir, args.steps, args.save_steps, args.batch_size)
  kills, differing = run(args, log)
  return 0 if _report(kills, differing, args, log) else 1


if __name__ == '__main__':
  sys.exit(main())
