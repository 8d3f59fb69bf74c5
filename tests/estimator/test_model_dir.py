"""Model directories TF's tools read, both ways: what tfmon's Estimator writes,
TF1's readers read by name; what TF 2.15's Estimator wrote, tfmon continues.

data/make_tf215_model_fns.py defines the model_fn and, run under TF 2.15,
recorded data/tf215_model_fns.json (TF's log, evaluation, and the variables
after TF trained its model_dir on) and data/tf215_model_fn_dir (its checkpoint
of step 5). TF 2.15 itself (`tf.estimator.Estimator`) trained and evaluated a
model_dir tfmon wrote when this was made; CI has no TF 2.15, so here TF1's
readers of TF 2.21 stand for it: tf.compat.v1's Saver in a tf.Graph,
`tf.train.load_variable` and `import_meta_graph`.
"""

import logging
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.estimator import recorded as recorded_lib
from tfmon import estimator


def reference():
  """data/make_tf215_model_fns.py, the model_fn TF 2.15 ran."""
  return recorded_lib.script('model_fns')


def recorded():
  return recorded_lib.values('model_fns')


def _trained(model_dir, steps=None):
  model = reference().make_estimator(estimator, str(model_dir))
  model.train(reference().train_input, steps=steps or reference().STEPS)
  return model


def _predicted_probabilities(model):
  return np.stack([p['probabilities'] for p in model.predict(reference().predict_input)])


def test_tf1_readers_read_a_tfmon_model_dir_by_name(tmp_path):
  model = _trained(tmp_path)
  checkpoint = model.latest_checkpoint()
  expected = _predicted_probabilities(model)
  inputs = reference().features()[:5]
  assert tf.train.load_variable(str(tmp_path), 'dense/kernel').shape == (4, 5)
  np.testing.assert_array_equal(tf.train.load_variable(checkpoint, 'dense_1/bias'),
                                model.get_variable_value('dense_1/bias'))

  # TF1's Saver, in a tf.Graph of the model_fn's layers, restores by name.
  with tf.Graph().as_default() as graph:
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    spec = reference().make_model_fn(estimator)({'x': x}, None, estimator.ModeKeys.PREDICT)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session(graph=graph) as session:
      saver.restore(session, checkpoint)
      probabilities = session.run(spec.predictions['probabilities'], {x: inputs})
  np.testing.assert_allclose(probabilities, expected, rtol=1e-6)

  # model.ckpt-N.meta: TF1's graph, run by op names after its Saver restores.
  assert os.path.exists(checkpoint + '.meta')
  with tf.Graph().as_default() as graph:
    saver = tf.compat.v1.train.import_meta_graph(checkpoint + '.meta')
    with tf.compat.v1.Session(graph=graph) as session:
      saver.restore(session, checkpoint)
      features = graph.get_operation_by_name('IteratorGetNext').outputs[0]
      probabilities = session.run('softmax_tensor:0', {features: inputs})
      global_step = tf.compat.v1.train.get_global_step(graph)  # its collection's
      assert session.run(global_step) == reference().STEPS
  np.testing.assert_allclose(probabilities, expected, rtol=1e-6)


@pytest.mark.parametrize('scaffold_saver', [False, True],
                         ids=['default_saver', 'scaffold_saver'])
def test_the_meta_graph_restores_with_training_metrics_and_a_scaffold_saver(
    tmp_path, scaffold_saver):
  # A metric in TRAIN mode (TF's samples logged its update op) makes local
  # variables, which TF1's Saver did not save; a Scaffold's Saver is the one
  # TF1 wrote the .meta with.
  model_fn = reference().make_model_fn(estimator)

  def model_fn_with_metric(features, labels, mode):
    spec = model_fn(features, labels, mode)
    if mode == estimator.ModeKeys.TRAIN:
      classes = tf.argmax(tf.compat.v1.get_default_graph().get_tensor_by_name(
          'softmax_tensor:0'), 1)
      tf.compat.v1.summary.scalar(
          'train_accuracy', tf.compat.v1.metrics.accuracy(labels, classes)[1])
      if scaffold_saver:
        spec = spec._replace(scaffold=tf.compat.v1.train.Scaffold(
            saver=tf.compat.v1.train.Saver(max_to_keep=2)))
    return spec

  model = estimator.Estimator(model_fn_with_metric, str(tmp_path))
  model.train(reference().train_input, steps=2)
  checkpoint = model.latest_checkpoint()
  with tf.Graph().as_default() as graph:
    saver = tf.compat.v1.train.import_meta_graph(checkpoint + '.meta')
    with tf.compat.v1.Session(graph=graph) as session:
      saver.restore(session, checkpoint)
      features = graph.get_operation_by_name('IteratorGetNext').outputs[0]
      probabilities = session.run('softmax_tensor:0',
                                  {features: reference().features()[:5]})
  np.testing.assert_allclose(probabilities, _predicted_probabilities(model), rtol=1e-6)


def _events(directory):
  """`[(step, kind)]` of the events in `directory`, a summary's kind by tag."""
  events = []
  for path in sorted(tf.io.gfile.glob(os.path.join(directory, 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      kind = event.WhichOneof('what')
      if kind == 'summary':
        events += [(event.step, value.tag, value) for value in event.summary.value]
      else:
        events.append((event.step, kind, event))
  return events


def test_event_files_hold_tf1s_graphs_and_the_evaluated_checkpoint(tmp_path):
  model = _trained(tmp_path)
  train_events = {kind: value for _, kind, value in _events(tmp_path)}
  assert {'graph_def', 'meta_graph_def', 'loss'} <= set(train_events)
  meta = train_events['meta_graph_def'].meta_graph_def
  assert 'dense/kernel' in {n.name for n in tf.compat.v1.MetaGraphDef.FromString(meta)
                            .graph_def.node}

  model.evaluate(reference().eval_input)
  eval_events = _events(tmp_path / 'eval')
  kinds = [kind for _, kind, _ in eval_events]
  # As TF 2.15's eval/: its graph and meta graph, the metrics, the checkpoint.
  assert kinds[kinds.index('graph_def'):] == [
      'graph_def', 'meta_graph_def', 'accuracy', 'loss', 'checkpoint_path']
  step, _, value = eval_events[-1]
  assert step == reference().STEPS
  assert tf.make_ndarray(value.tensor) == model.latest_checkpoint().encode()


def _skeleton(line):
  """A log line as compared: its first line, numbers as N, up to a printed
  dict or list (the config, signature names)."""
  line = re.sub(r'-?\d+(\.\d+)?(e-?\d+)?', 'N', line.splitlines()[0])
  return re.split(r'[{\[]', line)[0]


# TF 2.15 wrote a TF1 SavedModel with TF1's builder, which logged these; tfmon
# writes a TF2 SavedModel (TF's writer logs 'Assets written to') and names the
# export's final directory, not the temporary one.
_TF1_SAVED_MODEL_LINES = ('Assets added to graph.', 'No assets to write.',
                          'SavedModel written to: <model_dir>/export/temp-1/saved_model.pb')


def test_the_log_has_tf215s_lines_in_tf215s_order(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  model = _trained(tmp_path)
  model.evaluate(reference().eval_input, steps=2)
  list(model.predict(reference().predict_input))
  model.export_saved_model(str(tmp_path / 'export'),
                           reference().serving_input_receiver_fn(estimator))
  ours = [_skeleton(r.getMessage().replace(str(tmp_path), '<model_dir>'))
          for r in caplog.records if r.levelno == logging.INFO]
  theirs = [_skeleton(line) for line in recorded()['log']]
  theirs = [line for line in theirs
            if line not in map(_skeleton, _TF1_SAVED_MODEL_LINES)]
  # Each of TF's lines, in TF's order (tfmon may log more in between).
  position = 0
  for line in theirs:
    assert line in ours[position:], (line, ours[position:])
    position = ours.index(line, position) + 1


def test_a_tf215_model_dir_continues(tmp_path, caplog):
  shutil.copytree(os.path.join(recorded_lib.DATA, 'tf215_model_fn_dir'), tmp_path, dirs_exist_ok=True)
  model = reference().make_estimator(estimator, str(tmp_path))
  results = model.evaluate(reference().eval_input)
  for key, value in recorded()['evaluated'].items():
    np.testing.assert_allclose(results[key], value, rtol=1e-6, err_msg=key)
  # TF 2.15's own line, to the digit: float32 values printed as TF printed them.
  caplog.set_level(logging.INFO)
  model.evaluate(reference().eval_input, steps=2)
  saving_dict = [line for line in recorded()['log'] if line.startswith('Saving dict')]
  assert saving_dict[0] in caplog.messages

  model.train(reference().train_input, steps=reference().STEPS)  # as TF 2.15 did
  assert model.latest_checkpoint().endswith(f'model.ckpt-{2 * reference().STEPS}')
  continued = recorded()['continued']
  assert model.get_variable_names() == sorted(continued)
  for name, value in continued.items():
    np.testing.assert_allclose(model.get_variable_value(name), value, rtol=1e-5,
                               atol=1e-6, err_msg=name)
