"""EvaluationHook: what it computes and when, what it writes, what it leaves alone."""

import logging
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfmon
from tests import event_files
from tests.event_files import events as _events, steps as _steps, values as _values
from tests.training import Job, forget_global_step
from tfmon.hooks.evaluation import EvaluationHook, read_eval_metrics

_NO_DEFAULT_HOOKS = dict(save_summaries_steps=None, log_step_count_steps=None)


def _validation_data():
  """10 examples in batches of 4, 4 and 2: an unweighted mean of batch means is wrong."""
  rng = np.random.default_rng(7)
  features = rng.normal(size=(10, 4)).astype(np.float32)
  labels = rng.integers(0, 3, size=10)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
  return features, labels, dataset


class _Recorder(tfmon.train.SessionRunHook):
  """Keeps `snapshot()` after every run, by post-step global step."""

  def __init__(self, global_step, snapshot):
    self._global_step = global_step
    self._snapshot = snapshot
    self.by_step = {}

  def after_run(self, run_context, run_values):
    self.by_step[int(self._global_step.numpy())] = self._snapshot()


def _numpy_loss_and_accuracy(weights, features, labels):
  """The Job model's mean cross-entropy and accuracy, by hand."""
  kernel1, bias1, kernel2, bias2 = weights
  logits = np.maximum(features @ kernel1 + bias1, 0) @ kernel2 + bias2
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  loss = -log_softmax[np.arange(len(labels)), labels].mean()
  accuracy = (logits.argmax(axis=1) == labels).mean()
  return loss, accuracy


def test_results_equal_a_numpy_computation_with_the_weights_of_that_step():
  job = Job()
  features, labels, dataset = _validation_data()
  accuracy = keras.metrics.SparseCategoricalAccuracy()
  traces = []

  def eval_step(batch_features, batch_labels):
    traces.append(1)
    logits = job.model(batch_features, training=False)
    accuracy.update_state(batch_labels, logits)
    return {'loss': job.loss_fn(batch_labels, logits)}

  evaluation = EvaluationHook(eval_step, dataset, every_n_steps=3,
                              metrics={'accuracy': accuracy})
  weights = _Recorder(job.global_step,
                      lambda: [w.numpy() for w in job.model.weights])
  job.train(7, hooks=[weights, evaluation], **_NO_DEFAULT_HOOKS)

  results = evaluation.results_by_step
  assert list(results) == [3, 6, 7]  # every 3 steps, and the final step at end
  for step, result in results.items():
    loss, acc = _numpy_loss_and_accuracy(weights.by_step[step], features, labels)
    assert result['global_step'] == step
    assert result['loss'] == pytest.approx(loss, rel=1e-5)
    assert result['accuracy'] == pytest.approx(acc)
  assert len({float(r['loss']) for r in results.values()}) == 3  # the model trained
  assert evaluation.latest_results == results[7]
  assert len(traces) == 1  # three evaluations, one trace of eval_step


def _constant_evaluation(global_step, **kwargs):
  """An evaluation whose results are exact: loss = global_step + 0.25, accuracy = 0.5.

  Features 0..5 in batches of 4 and 2 have batch means 1.5 and 4.5: weighted by
  batch size the mean is 2.5 (unweighted it would be 3.0).
  """
  features = np.arange(6, dtype=np.float32)
  labels = np.array([1, 0, 1, 0, 1, 0], dtype=np.float32)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
  accuracy = keras.metrics.Mean()

  def eval_step(batch_features, batch_labels):
    accuracy.update_state(batch_labels)
    return {'loss': tf.reduce_mean(batch_features) / 10 +
                    tf.cast(global_step, tf.float32)}

  return EvaluationHook(eval_step, dataset, metrics={'accuracy': accuracy}, **kwargs)


def _increment_global_step(global_step, last_step, hooks):
  def step():
    global_step.assign_add(1)

  with tfmon.train.MonitoredSession(
      hooks=hooks + [tfmon.train.StopAtStepHook(last_step=last_step)]) as sess:
    while not sess.should_stop():
      sess.run(tfmon.train.op(step))


def test_logs_estimators_line_and_writes_event_files(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _constant_evaluation(global_step, every_n_steps=2,
                                    summary_dir=str(tmp_path), name='validation')
  _increment_global_step(global_step, 4, [evaluation])

  assert ('Saving dict for global step 2: accuracy = 0.5, global_step = 2, '
          'loss = 2.25') in caplog.text
  assert ('Saving dict for global step 4: accuracy = 0.5, global_step = 4, '
          'loss = 4.25') in caplog.text
  assert caplog.text.count('Saving dict for global step') == 2
  # As Estimator wrote them: v1 simple_value scalars, which TF1-era readers see.
  events = _events(tmp_path / 'validation')
  assert event_files.scalars(events, 'loss') == ([2, 4], [2.25, 4.25])
  assert event_files.scalars(events, 'accuracy') == ([2, 4], [0.5, 0.5])
  assert event_files.simple_values(tmp_path / 'validation', 'loss') == {
      2: 2.25, 4: 4.25}
  assert 'global_step' not in events.Tags()['scalars']  # as Estimator: it is the step


def test_rerunning_a_finished_job_does_not_evaluate_its_last_step_again(tmp_path,
                                                                       caplog):
  caplog.set_level(logging.INFO)
  global_step = tfmon.train.get_or_create_global_step()
  _increment_global_step(global_step, 4, [_constant_evaluation(
      global_step, every_n_steps=3, summary_dir=str(tmp_path))])  # 3, and 4 at end
  caplog.clear()
  rerun = _constant_evaluation(global_step, every_n_steps=3, at_start=True,
                               summary_dir=str(tmp_path))
  _increment_global_step(global_step, 4, [rerun])  # nothing left to train
  assert 'Saving dict' not in caplog.text
  assert 'Global step 4 was evaluated by an earlier run' in caplog.text
  assert rerun.latest_results == {'accuracy': 0.5, 'loss': 4.25, 'global_step': 4}
  assert not rerun.results_by_step  # this session evaluated nothing
  assert event_files.served(tmp_path / 'eval', 'loss') == ([3, 4], [3.25, 4.25])


def test_a_resumed_job_replaces_the_evaluations_made_after_its_checkpoint(tmp_path):
  global_step = tfmon.train.get_or_create_global_step()
  _increment_global_step(global_step, 6, [_constant_evaluation(
      global_step, every_n_steps=2, summary_dir=str(tmp_path))])  # 2, 4, 6
  global_step.assign(3)  # as restoring a checkpoint of step 3 does
  _increment_global_step(global_step, 6, [_constant_evaluation(
      global_step, every_n_steps=2, summary_dir=str(tmp_path))])  # 5, then 6 at end
  steps, values = event_files.served(tmp_path / 'eval', 'loss')
  assert steps == [2, 5, 6]  # the first run's 4 and 6 are superseded
  assert values == [2.25, 5.25, 6.25]
  # Early stopping reading the directory sees the same evaluations.
  assert {step: metrics['loss'] for step, metrics in
          read_eval_metrics(tmp_path / 'eval').items()} == {
              2: 2.25, 5: 5.25, 6: 6.25}


@pytest.mark.parametrize('kwargs, evaluated_steps', [
    (dict(every_n_steps=4), [4, 8, 10]),
    (dict(every_n_steps=4, at_end=False), [4, 8]),
    (dict(every_n_steps=5), [5, 10]),  # the final step was just evaluated
    (dict(every_n_steps=4, at_start=True), [0, 4, 8, 10]),
    (dict(every_n_secs=3600), [10]),
    (dict(), [10]),
])
def test_trigger_steps(kwargs, evaluated_steps):
  global_step = tfmon.train.get_or_create_global_step()
  evaluation = _constant_evaluation(global_step, **kwargs)
  _increment_global_step(global_step, 10, [evaluation])
  assert list(evaluation.results_by_step) == evaluated_steps
  assert [r['loss'] for r in evaluation.results_by_step.values()] == [
      step + 0.25 for step in evaluated_steps]


def test_evaluation_changes_no_training_state():
  """Model, optimizer and global step are as before, and the training input goes on."""

  def train(with_evaluation):
    forget_global_step()
    job = Job()
    # The evaluation iterates the very dataset training reads from.
    dataset = tf.data.Dataset.from_tensor_slices((job.features, job.labels))
    batches = iter(dataset)
    examples = keras.metrics.Sum()

    def step():
      features, labels = next(batches)
      with tf.GradientTape() as tape:
        loss = job.loss_fn(labels, job.model(features, training=True))
      grads = tape.gradient(loss, job.model.trainable_variables)
      job.optimizer.apply_gradients(zip(grads, job.model.trainable_variables))
      job.global_step.assign_add(1)

    def eval_step(features, labels):
      examples.update_state(tf.ones_like(labels, tf.float32))
      return {'loss': job.loss_fn(labels, job.model(features, training=False))}

    state = lambda: job.variables() + [job.global_step.numpy()]
    before, after = _Recorder(job.global_step, state), _Recorder(job.global_step, state)
    evaluation = EvaluationHook(eval_step, dataset, every_n_steps=2,
                                metrics={'examples': examples})
    hooks = [before, evaluation, after] if with_evaluation else []
    with tfmon.train.MonitoredSession(
        hooks=hooks + [tfmon.train.StopAtStepHook(last_step=6)]) as sess:
      while not sess.should_stop():
        sess.run(tfmon.train.op(step))
    return job.variables(), before, evaluation, after

  final, before, evaluation, after = train(with_evaluation=True)
  assert list(evaluation.results_by_step) == [2, 4, 6]
  for step in (2, 4, 6):
    assert len(before.by_step[step]) == len(after.by_step[step]) > 5
    for b, a in zip(before.by_step[step], after.by_step[step]):
      np.testing.assert_array_equal(b, a)
    # The whole dataset, afresh, each time: 16 batches of 8.
    assert evaluation.results_by_step[step]['examples'] == 128
  final_without_evaluation, *_ = train(with_evaluation=False)
  for with_eval, without_eval in zip(final, final_without_evaluation):
    np.testing.assert_array_equal(with_eval, without_eval)


def test_dict_elements_and_a_tf_function_eval_step():
  global_step = tfmon.train.get_or_create_global_step()
  dataset = tf.data.Dataset.from_tensor_slices(
      {'x': np.arange(5, dtype=np.float32), 'y': 2 * np.ones(5, np.float32)}).batch(2)
  total = keras.metrics.Sum()

  @tf.function
  def eval_step(batch):
    total.update_state(batch['x'])
    return {'x_times_y': tf.reduce_mean(batch['x'] * batch['y']),
            'count': tf.size(batch['x'])}  # an int result is averaged too

  evaluation = EvaluationHook(eval_step, dataset, metrics=[total])
  _increment_global_step(global_step, 1, [evaluation])
  results = evaluation.latest_results
  assert set(results) == {'x_times_y', 'count', 'sum', 'global_step'}
  assert results['x_times_y'] == pytest.approx(4.0)  # mean of 2x over 0..4
  assert results['count'] == pytest.approx((2 * 2 + 2 * 2 + 1 * 1) / 5)
  assert results['sum'] == 10.0
  assert evaluation.metric_names == ['count', 'sum', 'x_times_y']


def test_constructor_errors():
  _, _, dataset = _validation_data()
  two_arguments = lambda features, labels: {'loss': 0.}
  with pytest.raises(TypeError, match=r'eval_step .*<lambda>\(batch\) cannot take '
                     r'the elements of the dataset \(too many positional '
                     r'arguments\)\. The elements \(\(TensorSpec.*\)\) are 2-tuples, '
                     r'so eval_step is called with 2 positional arguments'):
    EvaluationHook(lambda batch: {}, dataset)
  with pytest.raises(TypeError, match='not tuples, so eval_step is called with one '
                     r'positional argument: eval_step\(batch\)'):
    EvaluationHook(two_arguments, dataset.map(lambda x, y: x))
  with pytest.raises(TypeError, match='eval_step must be callable'):
    EvaluationHook('eval', dataset)
  with pytest.raises(TypeError, match=r'dataset must be a tf.data.Dataset; got '
                     r'\[1, 2\] of type list'):
    EvaluationHook(two_arguments, [1, 2])
  with pytest.raises(ValueError, match=r'needs a batched dataset.*start with a scalar'
                     r'.*dataset.batch\(batch_size\)'):
    EvaluationHook(two_arguments, tf.data.Dataset.from_tensor_slices(([1, 2], [3, 4])))
  with pytest.raises(ValueError, match='dataset is empty'):
    EvaluationHook(two_arguments, dataset.take(0))
  with pytest.raises(ValueError, match='dataset is infinite'):
    EvaluationHook(two_arguments, dataset.repeat())
  with pytest.raises(ValueError, match='at most one of every_n_steps and every_n_secs; '
                     'got every_n_steps=1 and every_n_secs=1'):
    EvaluationHook(two_arguments, dataset, every_n_steps=1, every_n_secs=1)
  with pytest.raises(ValueError, match='every_n_steps must be a positive int or '
                     'None; got 0'):
    EvaluationHook(two_arguments, dataset, every_n_steps=0)
  with pytest.raises(ValueError, match='name must be a non-empty string'):
    EvaluationHook(two_arguments, dataset, name='')
  with pytest.raises(TypeError, match='is not a Keras metric'):
    EvaluationHook(two_arguments, dataset, metrics=[lambda: 0])
  with pytest.raises(ValueError, match="two metrics named 'mean'"):
    EvaluationHook(two_arguments, dataset,
                   metrics=[keras.metrics.Mean(), keras.metrics.Mean()])
  with pytest.raises(ValueError, match="'global_step' is reserved"):
    EvaluationHook(two_arguments, dataset, metrics={'global_step': keras.metrics.Mean()})


@pytest.mark.parametrize('eval_step, metrics, error, message', [
    (lambda x, y: tf.reduce_mean(x), None, TypeError,
     r'returned <tf.Tensor .*>; it must return a dict from name to scalar tensor'),
    (lambda x, y: {'per_example': x[:, 0]}, None, ValueError,
     r"result 'per_example' has shape \(None,\); evaluation results must be scalars"),
    (lambda x, y: {'name': tf.constant('a')}, None, TypeError,
     "result 'name' is a string tensor"),
    (lambda x, y: None, None, ValueError, 'returned None and no metrics were given'),
    (lambda x, y: {'global_step': 1.}, None, ValueError, "'global_step', which is "
     'reserved'),
    (lambda x, y: {'accuracy': 1.}, {'accuracy': keras.metrics.Mean()}, ValueError,
     "returned 'accuracy', which is also the name of a metric"),
])
def test_bad_eval_step_results_fail_the_first_run(eval_step, metrics, error,
                                                  message):
  global_step = tfmon.train.get_or_create_global_step()
  _, _, dataset = _validation_data()
  evaluation = EvaluationHook(eval_step, dataset, metrics=metrics, at_end=False)
  with tfmon.train.MonitoredSession(hooks=[evaluation]) as session:
    with pytest.raises(error, match=message):
      session.run(tfmon.train.op(lambda: global_step.assign_add(1)))
  with pytest.raises(error, match=message):  # known bad: at the next creation
    tfmon.train.MonitoredSession(hooks=[evaluation])
  with pytest.raises(error, match=message):  # with at_start, at creation
    tfmon.train.MonitoredSession(hooks=[EvaluationHook(
        eval_step, dataset, metrics=metrics, at_start=True)])


def test_the_evaluation_is_prepared_during_the_first_run_in_another_thread():
  """eval_step traced, the evaluation's function built and run over no batches
  (so that TensorFlow optimizes it then), while the first training call runs:
  the first evaluation builds nothing, and the input is read only by it."""
  job = Job()
  features, labels, _ = _validation_data()
  threads, reads = [], []

  def examples():
    for i, example in enumerate(zip(features, labels)):
      reads.append(i)
      yield example

  dataset = tf.data.Dataset.from_generator(examples, output_signature=(
      tf.TensorSpec([4], tf.float32), tf.TensorSpec([], tf.int64))).batch(4)

  def eval_step(features, labels):
    threads.append(threading.current_thread())
    return {'loss': job.loss_fn(labels, job.model(features, training=False))}

  evaluation = EvaluationHook(eval_step, dataset, every_n_steps=2)
  with tfmon.train.MonitoredSession(hooks=[evaluation]) as session:
    raw = session._coordinated_creator.tf_sess  # pylint: disable=protected-access
    assert not threads  # not at creation: that would delay the first step
    session.run(job.step)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert evaluation.metric_names == ['loss']
    assert raw.compiled_functions == 2  # the training call's and the evaluation's
    assert not reads and not evaluation.results_by_step
    session.run(job.step)
    assert list(evaluation.results_by_step) == [2]
    assert raw.compiled_functions == 2
    assert reads == list(range(10))
  assert len(threads) == 1


def test_an_eval_step_that_changes_the_global_step_is_an_error():
  global_step = tfmon.train.get_or_create_global_step()
  _, _, dataset = _validation_data()

  def eval_step(features, labels):
    global_step.assign_add(1)
    return {'loss': tf.reduce_mean(features)}

  evaluation = EvaluationHook(eval_step, dataset, at_start=True)
  with pytest.raises(RuntimeError, match='changed the global step from 0 to 3. An '
                     'evaluation must not change training state'):
    tfmon.train.MonitoredSession(hooks=[evaluation])


def test_needs_a_global_step():
  _, _, dataset = _validation_data()
  evaluation = EvaluationHook(lambda x, y: {'loss': tf.reduce_mean(x)}, dataset)
  with pytest.raises(RuntimeError, match='Global step should be created to use '
                     'EvaluationHook'):
    tfmon.train.MonitoredSession(hooks=[evaluation])
