"""Records what TF 2.15's Estimator does with a custom model_fn, for
tests/estimator/test_model_dir.py and test_model_fns.py.

Run it with TensorFlow 2.15 and tensorflow-estimator 2.15 (not installed in CI):

  python -m venv /tmp/tf215 && /tmp/tf215/bin/pip install tensorflow-cpu==2.15.1 \
      tensorflow-estimator==2.15.0
  /tmp/tf215/bin/python tests/estimator/data/make_tf215_model_fns.py

It writes `tf215_model_fns.json` and `tf215_model_fn_dir/`:
  - `log`: the INFO lines TF logged for `train`, `evaluate(steps=2)`, `predict`
    and `export_saved_model` of `model_fn` in a fresh model_dir (named
    `<model_dir>` there);
  - `tf215_model_fn_dir/`: that model_dir's checkpoint of step STEPS (a few KB);
    `evaluated`: `evaluate()` of it; `continued`: the checkpoint's variables
    after TF 2.15 trained it STEPS more steps, which tfmon must reproduce by
    continuing the directory;
  - `seeded_layers`: the variables `model_fn`'s `tf.compat.v1.layers` start
    from (`model.ckpt-0`) under `RunConfig(tf_random_seed=SEED)` with
    `disable_v2_behavior()`: TF1's values (TF 2.15's v2 Estimator drew them at
    random in every run).

`model_fn` is written against a namespace (`tf.estimator` here, tfmon's in the
tests), so both sides run this one definition.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

SEED = 7
STEPS = 5
BATCH = 4
HERE = os.path.dirname(os.path.abspath(__file__))


def features():
  """Twelve examples of four numbers."""
  return (np.arange(48, dtype=np.float32).reshape(12, 4) % 7) / 3.0 - 1.0


def labels():
  return (np.arange(12) % 3).astype(np.int64)


def train_input():
  return tf.data.Dataset.from_tensor_slices(({'x': features()}, labels())).repeat().batch(
      BATCH)


def eval_input():
  return tf.data.Dataset.from_tensor_slices(({'x': features()}, labels())).batch(BATCH)


def predict_input():
  return tf.data.Dataset.from_tensor_slices({'x': features()[:5]}).batch(BATCH)


def serving_input_receiver_fn(estimator):
  def receiver_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name='x')
    return estimator.export.ServingInputReceiver({'x': x}, {'x': x})
  return receiver_fn


def make_model_fn(estimator):
  """A model_fn of TF1's layers tutorials: two `tf.compat.v1.layers.dense`, Adam."""

  def model_fn(features, labels, mode):
    hidden = tf.compat.v1.layers.dense(features['x'], 5, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(hidden, 3)
    predictions = {'classes': tf.argmax(logits, 1),
                   'probabilities': tf.nn.softmax(logits, name='softmax_tensor')}
    if mode == estimator.ModeKeys.PREDICT:
      return estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
          'serving_default': estimator.export.PredictOutput(predictions)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == estimator.ModeKeys.EVAL:
      return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
          'accuracy': tf.compat.v1.metrics.accuracy(labels, predictions['classes'])})
    train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

  return model_fn


def make_estimator(estimator, model_dir):
  return estimator.Estimator(make_model_fn(estimator), model_dir=model_dir,
                             config=estimator.RunConfig(tf_random_seed=SEED,
                                                        save_checkpoints_steps=STEPS))


def variables(model):
  return {name: model.get_variable_value(name).tolist()
          for name in model.get_variable_names()}


def _as_json(results):
  return {key: np.asarray(value).tolist() for key, value in results.items()}


class _Lines:
  """Collects the messages of INFO records."""

  def __init__(self):
    import logging  # pylint: disable=import-outside-toplevel
    self.lines = []
    lines = self.lines

    class Handler(logging.Handler):
      def emit(self, record):
        if record.levelno == logging.INFO:
          lines.append(record.getMessage())

    self.handler = Handler()


def _record_run(records):
  """train, evaluate, predict and export in a fresh model_dir: TF's log and the
  model_dir of step STEPS."""
  lines = _Lines()
  tf.get_logger().setLevel('INFO')
  tf.get_logger().addHandler(lines.handler)
  model_dir = tempfile.mkdtemp()
  model = make_estimator(tf.estimator, model_dir)
  model.train(train_input, steps=STEPS)
  model.evaluate(eval_input, steps=2)
  list(model.predict(predict_input))
  model.export_saved_model(os.path.join(model_dir, 'export'),
                           serving_input_receiver_fn(tf.estimator))
  tf.get_logger().removeHandler(lines.handler)
  records['log'] = [line.replace(model_dir, '<model_dir>') for line in lines.lines]
  records['evaluated'] = _as_json(model.evaluate(eval_input))

  target = os.path.join(HERE, 'tf215_model_fn_dir')
  shutil.rmtree(target, ignore_errors=True)
  os.makedirs(target)
  prefix = f'model.ckpt-{STEPS}'
  for name in os.listdir(model_dir):
    if name.startswith(prefix + '.') and not name.endswith('.meta'):
      shutil.copy(os.path.join(model_dir, name), target)
  with open(os.path.join(target, 'checkpoint'), 'w') as f:
    f.write(f'model_checkpoint_path: "{prefix}"\n'
            f'all_model_checkpoint_paths: "{prefix}"\n')

  continued_dir = tempfile.mkdtemp()
  shutil.copytree(target, continued_dir, dirs_exist_ok=True)
  model = make_estimator(tf.estimator, continued_dir)
  model.train(train_input, steps=STEPS)
  records['continued'] = variables(model)


def initial_layer_values(model_dir):
  """The layers' variables of `model_dir`'s step-0 checkpoint: where training started."""
  reader = tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-0'))
  return {name: reader.get_tensor(name).tolist()
          for name in reader.get_variable_to_shape_map() if name.startswith('dense')
          and '/Adam' not in name}


def _record_seeded_layers():
  """Run in a process of its own: disable_v2_behavior() is for the process."""
  tf.compat.v1.disable_v2_behavior()
  model_dir = tempfile.mkdtemp()
  make_estimator(tf.estimator, model_dir).train(train_input, steps=1)
  print(json.dumps(initial_layer_values(model_dir)))


def main():
  if sys.argv[1:] == ['seeded_layers']:
    _record_seeded_layers()
    return
  records = {'tensorflow': tf.__version__, 'seed': SEED, 'steps': STEPS}
  _record_run(records)
  seeded = subprocess.run([sys.executable, __file__, 'seeded_layers'], check=True,
                          capture_output=True, text=True).stdout
  records['seeded_layers'] = json.loads(seeded.strip().splitlines()[-1])
  with open(os.path.join(HERE, 'tf215_model_fns.json'), 'w') as f:
    json.dump(records, f, indent=1, sort_keys=True)
    f.write('\n')


if __name__ == '__main__':
  main()
