"""Startup and short runs: wall time from process start to steps 10, 100 and 300.

A session's start pays for tracing the step and for TensorFlow's first-call graph
optimization; on a big model both take seconds, and a short run pays them every
time it starts. Each variant runs in a fresh process (`python -m
benchmarks.startup --worker ...`), timed from just before the parent starts it
(imports, model building, session creation, tracing and graph optimization
included) to the moment each milestone's training step is done: the reporter is
each variant's first hook or callback, so duties due at that step (the
evaluation at step 100, the checkpoint at step 300) count toward the next
milestone alike in every variant. Variants run one at a time, in an order
rotated every round; the table shows each variant's median, and the ratios are
medians of same-round ratios (a variant's time moves up to 16% between rounds).

Models and duties:
  resnet50  `keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3),
            classes=10)`, batch 32 of random data, SGD. Duties: the loss logged
            every 50 steps, a loss summary and the step rate every 100, a
            checkpoint at the start and at step 300, a NaN check every step, an
            evaluation on 64 held-out images every 100 steps.
    tfmon   MonitoredTrainingSession defaults (checkpoint at creation and end,
            summaries and step rate every 100) + LoggingTensorHook,
            NanTensorHook, StopAtStepHook, EvaluationHook;
    keras   Model.fit, 3 epochs of 100 steps, validation every epoch, with
            ModelCheckpoint, TensorBoard (every 100 batches), TerminateOnNaN and a
            logging callback that also saves the weights at the start, as
            MonitoredTrainingSession does;
    tf1     TF1 graph mode, MonitoredTrainingSession with the same hooks and a
            hand-written evaluation hook, the model from tf_keras (Keras 2, which
            still builds in graph mode; `pip install tf-keras`, else the variant
            is skipped);
    tfmon-tfk  tfmon as above on the model and optimizer the tf1 variant runs
            (tf_keras' ResNet-50, whose batch norm is one fused op where Keras
            3's is several; tf.compat.v1.train.GradientDescentOptimizer): not
            a target, it tells tfmon's cost from the model code's.
  cifar10   TensorFlow's CIFAR-10 tutorial (cifar10.inference, tf.nn ops, batch
            128 of 24x24 crops, weight decay, activation histograms and
            scalars through tf.compat.v1.summary, in both variants) with its
            cifar10_train.py duties: MonitoredTrainingSession defaults, its
            `_LoggerHook` (a v1 hook fetching the loss every run, logging every
            10), StopAtStepHook and NanTensorHook. Variants tfmon and tf1.

  python -m benchmarks.startup [--model resnet50|cifar10|both] [--rounds N]
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MILESTONES = (10, 100, 300)
VARIANTS = {'resnet50': ('tfmon', 'keras', 'tf1', 'tfmon-tfk'),
            'cifar10': ('tfmon', 'tf1', 'tfmon-graph')}
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unavailable(Exception):
  """A variant that cannot run on this machine; says why."""


def _report(step):
  """Prints a milestone for the parent: the step and the wall clock."""
  print(json.dumps({'milestone': int(step), 'time': time.time()}), flush=True)


# --- Data and models, shared by the variants. ---


def _resnet_data(tf, np):
  rng = np.random.default_rng(0)
  train = (rng.normal(size=(32, 32, 32, 3)).astype(np.float32),
           rng.integers(0, 10, size=(32,)).astype(np.int32))
  held_out = (rng.normal(size=(64, 32, 32, 3)).astype(np.float32),
              rng.integers(0, 10, size=(64,)).astype(np.int32))
  return tf.data.Dataset.from_tensors(train).repeat(), held_out


def _cifar_data(tf, np):
  rng = np.random.default_rng(0)
  batch = (rng.normal(size=(128, 24, 24, 3)).astype(np.float32),
           rng.integers(0, 10, size=(128,)).astype(np.int32))
  return tf.data.Dataset.from_tensors(batch).repeat()


class _CifarTutorialModel:
  """cifar10.inference and cifar10.loss from TensorFlow's tutorial, in tf.nn ops.

  Variables are made once, up front, with `make_variable(name, shape,
  initializer)`: tf.compat.v1.get_variable in graph mode, tf.Variable eagerly.
  """

  def __init__(self, tf, make_variable):
    self._tf = tf
    self.weight_decays = []

    def weight(name, shape, stddev, wd):
      var = make_variable(name, shape, tf.compat.v1.truncated_normal_initializer(
          stddev=stddev))
      if wd:
        self.weight_decays.append((var, wd))
      return var

    def bias(name, shape, value):
      return make_variable(name, shape, tf.compat.v1.constant_initializer(value))

    self.conv1 = (weight('conv1/weights', [5, 5, 3, 64], 5e-2, 0.0),
                  bias('conv1/biases', [64], 0.0))
    self.conv2 = (weight('conv2/weights', [5, 5, 64, 64], 5e-2, 0.0),
                  bias('conv2/biases', [64], 0.1))
    dim = 6 * 6 * 64
    self.local3 = (weight('local3/weights', [dim, 384], 0.04, 0.004),
                   bias('local3/biases', [384], 0.1))
    self.local4 = (weight('local4/weights', [384, 192], 0.04, 0.004),
                   bias('local4/biases', [192], 0.1))
    self.softmax = (weight('softmax_linear/weights', [192, 10], 1 / 192.0, 0.0),
                    bias('softmax_linear/biases', [10], 0.0))

  def _activation_summary(self, x, name, summary):
    summary.histogram(name + '/activations', x)
    summary.scalar(name + '/sparsity', self._tf.math.zero_fraction(x))

  def loss(self, images, labels, summary):
    """The tutorial's total loss; `summary` is tf.summary or tf.compat.v1.summary."""
    tf = self._tf
    x = tf.nn.relu(tf.nn.conv2d(images, self.conv1[0], [1, 1, 1, 1], 'SAME') +
                   self.conv1[1], name='conv1')
    self._activation_summary(x, 'conv1', summary)
    x = tf.nn.max_pool2d(x, 3, 2, 'SAME', name='pool1')
    x = tf.nn.lrn(x, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm1')
    x = tf.nn.relu(tf.nn.conv2d(x, self.conv2[0], [1, 1, 1, 1], 'SAME') +
                   self.conv2[1], name='conv2')
    self._activation_summary(x, 'conv2', summary)
    x = tf.nn.lrn(x, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm2')
    x = tf.nn.max_pool2d(x, 3, 2, 'SAME', name='pool2')
    x = tf.reshape(x, [128, -1])
    x = tf.nn.relu(tf.matmul(x, self.local3[0]) + self.local3[1], name='local3')
    self._activation_summary(x, 'local3', summary)
    x = tf.nn.relu(tf.matmul(x, self.local4[0]) + self.local4[1], name='local4')
    self._activation_summary(x, 'local4', summary)
    logits = tf.add(tf.matmul(x, self.softmax[0]), self.softmax[1],
                    name='softmax_linear')
    cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), name='cross_entropy')
    decay = tf.add_n([tf.nn.l2_loss(v) * wd for v, wd in self.weight_decays])
    total = tf.add(cross_entropy, decay, name='total_loss')
    summary.scalar('total_loss', total)
    return total

  @property
  def variables(self):
    return [v for pair in (self.conv1, self.conv2, self.local3, self.local4,
                           self.softmax) for v in pair]


def cifar_tutorial_graph(tf, np, summary):
  """In a TF1 graph: the tutorial's loss and train op on the global step."""
  v1 = tf.compat.v1
  global_step = v1.train.get_or_create_global_step()
  model = _CifarTutorialModel(
      tf, lambda name, shape, init: v1.get_variable(name, shape, initializer=init))
  images, labels = v1.data.make_one_shot_iterator(_cifar_data(tf, np)).get_next()
  loss = model.loss(images, labels, summary)
  return loss, v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=global_step)


def cifar_tutorial_step(tf, np, summary, global_step):
  """Eagerly: the tutorial's train step as a step function, and its model."""
  model = _CifarTutorialModel(
      tf, lambda name, shape, init: tf.Variable(init(shape), name=name))
  batches = iter(_cifar_data(tf, np))
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)

  def train_step():
    images, labels = next(batches)
    with tf.GradientTape() as tape:
      total = model.loss(images, labels, summary)
    optimizer.apply_gradients(zip(tape.gradient(total, model.variables),
                                  model.variables))
    global_step.assign_add(1)
    return {'loss': total}

  return train_step, model


# --- The variants, each run in its own worker process. ---


def _tfmon_resnet(directory, tf1_model=False):
  """The tfmon variant; with `tf1_model`, on the model and optimizer TF1 runs."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tfmon  # pylint: disable=g-import-not-at-top
  if tf1_model:
    try:
      import tf_keras as keras  # pylint: disable=g-import-not-at-top
    except ImportError:
      raise Unavailable('needs tf_keras (Keras 2): pip install tf-keras') from None
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.01)
  else:
    import keras  # pylint: disable=g-import-not-at-top
    optimizer = keras.optimizers.SGD(0.01)
  global_step = tfmon.train.get_or_create_global_step()
  model = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3),
                                      classes=10)
  dataset, held_out = _resnet_data(tf, np)
  batches = iter(dataset)

  def train_step():
    images, labels = next(batches)
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
          labels, model(images, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    tf.summary.scalar('loss', loss)
    global_step.assign_add(1)
    return {'loss': loss}

  def eval_step(images, labels):
    return {'loss': tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        labels, model(images, training=False)))}

  hooks = [tfmon.train.LoggingTensorHook({'loss': 'loss'}, every_n_iter=50),
           tfmon.train.NanTensorHook('loss'),
           tfmon.train.StopAtStepHook(last_step=MILESTONES[-1]),
           tfmon.train.EvaluationHook(
               eval_step, tf.data.Dataset.from_tensor_slices(held_out).batch(32),
               every_n_steps=100, at_end=False, summary_dir=directory)]
  with tfmon.train.MonitoredTrainingSession(
      checkpoint_dir=directory, checkpoint={'model': model, 'optimizer': optimizer},
      hooks=hooks, chief_only_hooks=[_TfmonMilestones(tfmon)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(train_step))


def _TfmonMilestones(tfmon):  # pylint: disable=invalid-name
  """A tfmon hook that reports each milestone step as the run reaching it ends."""

  class Milestones(tfmon.train.SessionRunHook):

    def steps_until_observed(self, global_step):
      upcoming = [m for m in MILESTONES if m > global_step]
      return upcoming[0] - global_step if upcoming else None

    def after_run(self, run_context, run_values):
      _report(tfmon.training_util.global_step_after_run(
          run_context, tfmon.train.get_global_step()))

  return Milestones()


def _keras_resnet(directory):
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top
  model = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3),
                                      classes=10)
  model.compile(optimizer=keras.optimizers.SGD(0.01),
                loss='sparse_categorical_crossentropy')
  dataset, held_out = _resnet_data(tf, np)

  class Report(keras.callbacks.Callback):
    """Reports milestones: the first callback, as the milestone hooks are first."""

    def on_train_begin(self, logs=None):
      self.steps = 0

    def on_train_batch_end(self, batch, logs=None):
      self.steps += 1
      if self.steps in MILESTONES:
        _report(self.steps)

  class LogAndSaveAtStart(keras.callbacks.Callback):
    """The loss every 50 steps and the step rate every 100, as the hooks log
    them, and the checkpoint MonitoredTrainingSession writes before training."""

    def on_train_begin(self, logs=None):
      self.steps = 0
      self.last = time.time()
      self.model.save_weights(os.path.join(directory, 'start.weights.h5'))

    def on_train_batch_end(self, batch, logs=None):
      self.steps += 1
      if self.steps % 50 == 0:
        logging.info('loss = %s, step = %d', logs['loss'], self.steps)
      if self.steps % 100 == 0:
        now = time.time()
        logging.info('global_step/sec: %g', 100 / (now - self.last))
        self.last = now

  model.fit(dataset, epochs=3, steps_per_epoch=100,
            validation_data=tf.data.Dataset.from_tensor_slices(held_out).batch(32),
            verbose=0, callbacks=[
                Report(),
                keras.callbacks.ModelCheckpoint(
                    os.path.join(directory, 'model.weights.h5'),
                    save_weights_only=True, save_freq=MILESTONES[-1]),
                keras.callbacks.TensorBoard(directory, update_freq=100),
                keras.callbacks.TerminateOnNaN(), LogAndSaveAtStart()])


def _tf1_resnet(directory):
  try:
    import tf_keras  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise Unavailable('needs tf_keras (Keras 2) to build ResNet50 in graph '
                      'mode: pip install tf-keras') from None
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1
  v1.disable_eager_execution()
  global_step = v1.train.get_or_create_global_step()
  dataset, held_out = _resnet_data(tf, np)
  images, labels = v1.data.make_one_shot_iterator(dataset).get_next()
  model = tf_keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3),
                                         classes=10)
  loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
      labels, model(images, training=True)), name='loss')
  v1.summary.scalar('loss', loss)
  # Batch-norm statistics of this call (model.updates would add those of the
  # model's own symbolic Input, a placeholder nothing feeds).
  with tf.control_dependencies(model.get_updates_for(images)):
    train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=global_step, var_list=model.trainable_variables)
  eval_loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
      held_out[1], model(held_out[0], training=False)))

  class EvalHook(v1.train.SessionRunHook):
    """The hand-written evaluation hook of a TF1 job: every 100 steps."""

    def __init__(self):
      self.runs = 0

    def after_run(self, run_context, run_values):
      self.runs += 1
      if self.runs % 100 == 0:
        v1.logging.info('eval loss = %s', run_context.session.run(eval_loss))

  hooks = [v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=50),
           v1.train.NanTensorHook(loss),
           v1.train.StopAtStepHook(last_step=MILESTONES[-1]), EvalHook()]
  with v1.train.MonitoredTrainingSession(
      checkpoint_dir=directory, hooks=hooks,
      chief_only_hooks=[_Tf1Milestones(v1)]) as sess:
    while not sess.should_stop():
      sess.run(train_op)


def _Tf1Milestones(v1):  # pylint: disable=invalid-name
  """A v1 hook that reports milestones: one global step per run, counted."""

  class Milestones(v1.train.SessionRunHook):

    def begin(self):
      self.runs = 0

    def after_run(self, run_context, run_values):
      self.runs += 1
      if self.runs in MILESTONES:
        _report(self.runs)

  return Milestones()


def _cifar10(directory, variant):
  """The CIFAR-10 tutorial's cifar10_train.py: in TF1 graph mode ('tf1'), its
  graph code unchanged under tfmon.Graph ('tfmon-graph'), or ported to a step
  function ('tfmon')."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1

  class LoggerHook(v1.train.SessionRunHook):
    """The tutorial's _LoggerHook: asks for the loss every run, logs every 10."""

    def __init__(self, loss):
      self._loss = loss

    def begin(self):
      self._step = -1
      self._start_time = time.time()

    def before_run(self, run_context):
      self._step += 1
      return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
      if self._step % 10 == 0:
        duration = time.time() - self._start_time
        self._start_time = time.time()
        v1.logging.info('step %d, loss = %.2f (%.1f examples/sec)', self._step,
                        run_values.results, 10 * 128 / duration)
      if self._step + 1 in MILESTONES:
        _report(self._step + 1)

  # Both run the tutorial's own summary calls, v1's (SPEC section 7): TF2's
  # tf.summary.histogram buckets with a float64 one_hot of the whole tensor
  # (conv1's 4.7M activations: a 1.1 GB tensor, ~1 s a recording step).
  if variant == 'tf1':
    v1.disable_eager_execution()
    train = v1.train
    loss, fetch = cifar_tutorial_graph(tf, np, v1.summary)
    kwargs = {}
  elif variant == 'tfmon-graph':
    import tfmon  # pylint: disable=g-import-not-at-top
    train = tfmon.train
    graph_scope = contextlib.ExitStack()  # the rest of the worker is the with block
    graph_scope.enter_context(tfmon.Graph().as_default())
    loss, fetch = cifar_tutorial_graph(tf, np, v1.summary)
    kwargs = {}
  else:
    import tfmon  # pylint: disable=g-import-not-at-top
    train = tfmon.train
    step, model = cifar_tutorial_step(tf, np, v1.summary,
                                      train.get_or_create_global_step())
    loss, fetch = 'loss', tfmon.train.op(step)
    kwargs = {'checkpoint': {'variables': model.variables}}
  # TF's own hooks in both graph variants, as the TF1 script has them.
  hook_module = train if variant == 'tfmon' else v1.train
  hooks = [hook_module.StopAtStepHook(last_step=MILESTONES[-1]),
           hook_module.NanTensorHook(loss), LoggerHook(loss)]
  with train.MonitoredTrainingSession(checkpoint_dir=directory, hooks=hooks,
                                      **kwargs) as sess:
    while not sess.should_stop():
      sess.run(fetch)


_WORKERS = {
    ('resnet50', 'tfmon'): _tfmon_resnet,
    ('resnet50', 'tfmon-tfk'): lambda d: _tfmon_resnet(d, tf1_model=True),
    ('resnet50', 'keras'): _keras_resnet,
    ('resnet50', 'tf1'): _tf1_resnet,
    ('cifar10', 'tfmon'): lambda d: _cifar10(d, 'tfmon'),
    ('cifar10', 'tf1'): lambda d: _cifar10(d, 'tf1'),
    ('cifar10', 'tfmon-graph'): lambda d: _cifar10(d, 'tfmon-graph'),
}


def _worker(model, variant, directory):
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  try:
    _WORKERS[model, variant](directory)
  except Unavailable as e:
    print(json.dumps({'unavailable': str(e)}), flush=True)


def run_worker(module, model, variant, milestones, env=None):
  """Runs `python -m module --worker variant --model model --dir <a temporary
  directory>` in a fresh process, timed from just before it starts; returns
  `({milestone: seconds}, None)` from the lines its worker printed (`_report`),
  or `({}, reason)` for a variant that said it cannot run here.

  Raises:
    RuntimeError: the worker failed or missed a milestone (its stderr's tail).
  """
  with tempfile.TemporaryDirectory() as directory:
    start = time.time()
    process = subprocess.run(
        [sys.executable, '-m', module, '--worker', variant, '--model', model,
         '--dir', directory],
        cwd=_REPO_ROOT, env=env, capture_output=True, text=True, check=False)
  times, reason = {}, None
  for line in process.stdout.splitlines():
    if line.startswith('{'):
      record = json.loads(line)
      if 'unavailable' in record:
        reason = record['unavailable']
      else:
        times[record['milestone']] = record['time'] - start
  if reason is None and (process.returncode or set(times) != set(milestones)):
    raise RuntimeError(f'{model}/{variant} failed (exit {process.returncode}):\n'
                       f'{process.stderr[-3000:]}')
  return times, reason


def run_variant(model, variant):
  """Runs one variant in a fresh process; returns {milestone: seconds} or a reason."""
  return run_worker('benchmarks.startup', model, variant, MILESTONES)


def measure(model, rounds):
  """Returns {variant: [per-round {milestone: seconds}]} and skipped variants."""
  variants = VARIANTS[model]
  results = {v: [] for v in variants}
  skipped = {}
  for round_index in range(rounds):
    order = variants[round_index % len(variants):] + variants[:round_index % len(variants)]
    for variant in order:
      if variant in skipped:
        continue
      times, reason = run_variant(model, variant)
      if reason:
        skipped[variant] = reason
      else:
        results[variant].append(times)
  return {v: r for v, r in results.items() if r}, skipped


def _same_round_ratios(results, variant, baseline):
  """Per milestone, the median over rounds of `variant`'s time over `baseline`'s
  in the same round (each round runs every variant once, back to back)."""
  return [statistics.median(run[m] / base[m] for run, base in
                            zip(results[variant], results[baseline]))
          for m in MILESTONES]


def _print_table(model, rounds, results, skipped):
  print(f'{model}: seconds from process start to step N, median of {rounds} rounds')
  print('  variant   ' + ''.join(f'step {m:<6d}' for m in MILESTONES) +
        f'steps/s over {MILESTONES[-1]} steps')
  for variant, runs in results.items():
    medians = [statistics.median(run[m] for run in runs) for m in MILESTONES]
    print(f'  {variant:9s} ' + ''.join(f'{t:<11.2f}' for t in medians) +
          f'{MILESTONES[-1] / medians[-1]:.2f}')
  for variant, reason in skipped.items():
    print(f'  {variant:9s} unavailable: {reason}')
  comparisons = [('tfmon', other, 'tfmon time / %s time (target <= 1.0)' % other)
                 for other in results if other not in ('tfmon', 'tfmon-tfk', 'tfmon-graph')]
  comparisons.append(('tfmon-graph', 'tf1',
                      'the TF1 script under tfmon.Graph, time / tf1 time (target <= 1.0)'))
  comparisons.append(('tfmon-tfk', 'tf1', 'on the model TF1 runs, tfmon time / tf1 time'))
  print('  medians of same-round ratios:')
  for variant, baseline, label in comparisons:
    if variant in results and baseline in results:
      ratios = ', '.join(f'step {m}: {r:.3f}' for m, r in zip(
          MILESTONES, _same_round_ratios(results, variant, baseline)))
      print(f'  {label}: {ratios}')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--model', choices=['resnet50', 'cifar10', 'both'],
                      default='both')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--worker', help=argparse.SUPPRESS)
  parser.add_argument('--dir', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    _worker(args.model, args.worker, args.dir)
    return
  models = ['resnet50', 'cifar10'] if args.model == 'both' else [args.model]
  for model in models:
    results, skipped = measure(model, args.rounds)
    _print_table(model, args.rounds, results, skipped)


if __name__ == '__main__':
  main()
