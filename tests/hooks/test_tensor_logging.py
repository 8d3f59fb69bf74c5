"""LoggingTensorHook: what it logs, when, and its argument errors, against v1."""

import logging
import re

import pytest
import tensorflow as tf

import tfmon
from tfmon.hooks.tensor_logging import LoggingTensorHook

_ELAPSED = re.compile(r'^(.*) \((\d+\.\d{3}) sec\)$')


def _counting_step(increment=1):
  """A step adding `increment` to the global step; returns it and loss = step / 4."""
  global_step = tfmon.train.get_or_create_global_step()

  def step():
    global_step.assign_add(increment)
    value = global_step.read_value()
    return {'step': value, 'loss': tf.cast(value, tf.float32) / 4}

  return step


def _run(hooks, runs, step=None):
  step = step or _counting_step()
  with tfmon.train.MonitoredSession(hooks=hooks) as sess:
    for _ in range(runs):
      sess.run(tfmon.train.op(step))


def _logged(caplog):
  """The INFO lines the hook logged on TensorFlow's logger (not the session's
  creation lines), as (text, has the elapsed-secs suffix)."""
  lines = []
  for record in caplog.records:
    if (record.name == 'tensorflow' and record.levelno == logging.INFO and
        record.filename == 'tensor_logging.py'):
      message = record.getMessage()
      match = _ELAPSED.match(message)
      lines.append((match.group(1), True) if match else (message, False))
  return lines


@pytest.fixture(autouse=True)
def _info_logs(caplog):
  caplog.set_level(logging.INFO)


def test_logs_first_run_then_every_n_iter_in_list_order_with_elapsed_secs(caplog):
  _run([LoggingTensorHook(['step', 'loss'], every_n_iter=2)], runs=5)
  assert _logged(caplog) == [('step = 1, loss = 0.25', False),
                             ('step = 3, loss = 0.75', True),
                             ('step = 5, loss = 1.25', True)]


def test_dict_tags_are_logged_in_sorted_order(caplog):
  _run([LoggingTensorHook({'z_step': 'step', 'a_loss': 'loss'}, every_n_iter=1)],
       runs=2)
  assert _logged(caplog) == [('a_loss = 0.25, z_step = 1', False),
                             ('a_loss = 0.5, z_step = 2', True)]


def test_every_n_iter_counts_local_runs_not_the_global_step(caplog):
  tfmon.train.get_or_create_global_step().assign(100)
  _run([LoggingTensorHook(['step'], every_n_iter=2)], runs=4,
       step=_counting_step(increment=5))
  assert [text for text, _ in _logged(caplog)] == ['step = 105', 'step = 115']


def test_runs_that_do_not_log_fetch_nothing(caplog):
  counter = tf.Variable(0, name='counter')

  def count():
    counter.assign_add(1)
    return counter.read_value()

  _run([LoggingTensorHook({'count': count}, every_n_iter=3)], runs=7)
  # The fetched step function ran on runs 0, 3 and 6 only.
  assert [text for text, _ in _logged(caplog)] == ['count = 1', 'count = 2',
                                                   'count = 3']
  assert counter.numpy() == 3


def test_every_n_secs_triggers_on_time(caplog):
  _run([LoggingTensorHook(['step'], every_n_secs=3600)], runs=4)
  assert [text for text, _ in _logged(caplog)] == ['step = 1']
  caplog.clear()
  _run([LoggingTensorHook(['step'], every_n_secs=0)], runs=3)
  assert [text for text, _ in _logged(caplog)] == ['step = 5', 'step = 6',
                                                   'step = 7']


def test_graph_tensor_names_and_numpy_suppress(caplog):
  tfmon.train.get_or_create_global_step()
  small = tf.Variable([1e-5, 1.0], name='small')

  def step():
    tf.nn.softmax(tf.zeros([2]), name='softmax_tensor')

  hook = LoggingTensorHook({'probabilities': 'softmax_tensor:0',
                            'probs': 'softmax_tensor', 'small': small},
                           every_n_iter=1)
  _run([hook], runs=1, step=step)
  # v1 printed with suppress=True: 0.00001, not 1.e-05.
  assert _logged(caplog) == [
      ('probabilities = [0.5 0.5], probs = [0.5 0.5], small = [0.00001 1.     ]',
       False)]


def test_list_items_are_tagged_by_name(caplog):
  learning_rate = tf.Variable(0.125, name='learning_rate')
  global_step = tfmon.train.get_or_create_global_step()

  def doubled_step():
    return global_step.read_value() * 2

  _run([LoggingTensorHook(['step', learning_rate, doubled_step], every_n_iter=1)],
       runs=1)
  assert _logged(caplog) == [
      ('step = 1, learning_rate:0 = 0.125, doubled_step = 2', False)]


def test_at_end_logs_the_last_runs_values_when_the_session_ends(caplog):
  step = _counting_step()
  hook = LoggingTensorHook(['step', 'loss'], at_end=True)
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for _ in range(3):
      sess.run(tfmon.train.op(step))
    assert not _logged(caplog)
  assert _logged(caplog) == [('step = 3, loss = 0.75', False)]


def test_at_end_with_every_n_iter_logs_both(caplog):
  _run([LoggingTensorHook(['step'], every_n_iter=2, at_end=True)], runs=3)
  # v1's end() logs through the same timer, so the line carries elapsed secs.
  assert _logged(caplog) == [('step = 1', False), ('step = 3', True),
                             ('step = 3', True)]


def test_at_end_reads_variables_and_runs_callables_after_the_last_step(caplog):
  step = _counting_step()
  global_step = tfmon.train.get_global_step()
  hook = LoggingTensorHook({'global_step': global_step, 'loss': 'loss',
                            'doubled': lambda: global_step.read_value() * 2},
                           at_end=True)
  with tfmon.train.MonitoredSession(hooks=[hook]) as sess:
    for _ in range(3):
      sess.run(tfmon.train.op(step))
  # As v1's end(): the variable is 3 after three steps, not its pre-step 2; the
  # name gives the last run's value (end() runs no step to resolve it).
  assert _logged(caplog) == [('doubled = 6, global_step = 3, loss = 0.75', False)]


def test_at_end_of_variables_only_fetches_nothing_until_the_end(caplog):
  counter = tf.Variable(0, name='counter')
  step = _counting_step()

  def step_and_count():
    counter.assign_add(1)
    return step()

  def count_fetches():
    counter.assign_add(100)
    return counter.read_value()

  hook = LoggingTensorHook({'counter': count_fetches}, at_end=True)
  _run([hook], runs=3, step=step_and_count)
  # The callable ran once, in end(), after the three steps.
  assert _logged(caplog) == [('counter = 103', False)]
  assert counter.numpy() == 103
  caplog.clear()
  _run([LoggingTensorHook([counter], at_end=True)], runs=0)
  assert _logged(caplog) == [('counter:0 = 103', False)]  # v1 logged without runs


def test_at_end_without_runs_logs_nothing(caplog):
  _run([LoggingTensorHook(['step'], at_end=True)], runs=0)
  assert not _logged(caplog)


def test_formatter_output_is_logged_as_is(caplog):
  formatter = lambda values: f"step {values['step']} at 100%s"
  _run([LoggingTensorHook(['step'], every_n_iter=2, formatter=formatter)], runs=3)
  assert _logged(caplog) == [('step 1 at 100%s', False), ('step 3 at 100%s', False)]


def test_unknown_name_raises_at_the_run_with_the_returned_keys_and_nearest_names():
  hook = LoggingTensorHook(['lost'], every_n_iter=1)
  with pytest.raises(ValueError, match=r"^Fetch name 'lost' names no tensor or "
                     r"variable of this call, whose step functions return "
                     r"\['loss', 'step'\]; nearest names: \['loss'\]\.$"):
    _run([hook], runs=1)


@pytest.mark.parametrize('name', ['global_step', 'global_step:0'])
def test_a_variable_is_logged_by_its_name_as_in_tf1(caplog, name):
  # The variable's value when the run starts, as a fetched variable's.
  _run([LoggingTensorHook({'gs': name, 'loss': 'loss'}, every_n_iter=2)], runs=3)
  assert [text for text, _ in _logged(caplog)] == ['gs = 0, loss = 0.25',
                                                   'gs = 2, loss = 0.75']


def test_a_keras_layers_variable_is_logged_by_its_tf1_name(caplog):
  keras = pytest.importorskip('keras')
  model = keras.Sequential([keras.layers.Dense(1, kernel_initializer='ones',
                                               bias_initializer='zeros', name='dense')],
                           name='mlp')
  model.build((None, 2))
  step = _counting_step()

  def train():
    result = step()
    model.layers[0].bias.assign_add([1.0])
    return result

  # TF1 named it dense/bias; Keras 3 puts the model's name first.
  assert model.layers[0].bias.path == 'mlp/dense/bias'
  _run([LoggingTensorHook(['dense/bias', 'mlp/dense/bias'], every_n_iter=1)],
       runs=2, step=train)
  assert [text for text, _ in _logged(caplog)] == [
      'dense/bias = [0.], mlp/dense/bias = [0.]',
      'dense/bias = [1.], mlp/dense/bias = [1.]']


def test_argument_errors_are_v1s():
  message = ('^either at_end and/or exactly one of every_n_iter and every_n_secs '
             'must be provided.$')
  with pytest.raises(ValueError, match=message):
    LoggingTensorHook(['loss'])
  with pytest.raises(ValueError, match=message):
    LoggingTensorHook(['loss'], every_n_iter=1, every_n_secs=1)
  with pytest.raises(ValueError, match=message):
    LoggingTensorHook(['loss'], every_n_iter=1, every_n_secs=1, at_end=True)
  with pytest.raises(ValueError, match=r'^invalid every_n_iter=0\.$'):
    LoggingTensorHook(['loss'], every_n_iter=0)
  with pytest.raises(ValueError, match=r'^invalid every_n_iter=-2\.$'):
    LoggingTensorHook(['loss'], every_n_iter=-2, at_end=True)


def test_wrong_types_fail_at_construction():
  with pytest.raises(TypeError, match=r"tensors is the string 'loss'; pass a list "
                     r"of names \(\['loss'\]\)"):
    LoggingTensorHook('loss', every_n_iter=1)
  with pytest.raises(TypeError, match='tensors must be a dict of tags to tensors or '
                     'a list of tensor names; got 3'):
    LoggingTensorHook(3, every_n_iter=1)
  with pytest.raises(TypeError, match=r"tensors\['loss'\] holds <object object"):
    LoggingTensorHook({'loss': object()}, every_n_iter=1)
  with pytest.raises(TypeError, match='has the tag 1 of type int; tags are strings'):
    LoggingTensorHook({1: 'loss'}, every_n_iter=1)
  with pytest.raises(TypeError, match=r"tensors holds 3\.0 of type float.*"
                     r"tensors=\{'tag': value\}"):
    LoggingTensorHook([3.0], every_n_iter=1)
  with pytest.raises(ValueError, match="two items tagged '<lambda>'"):
    LoggingTensorHook([lambda: 1, lambda: 2], every_n_iter=1)
  with pytest.raises(TypeError, match="every_n_iter must be a number; got '5'"):
    LoggingTensorHook(['loss'], every_n_iter='5')
  with pytest.raises(TypeError, match='formatter must be a function'):
    LoggingTensorHook(['loss'], every_n_iter=1, formatter='%s')


def test_repeated_name_in_a_list_is_logged_twice_as_v1(caplog):
  _run([LoggingTensorHook(['step', 'step'], every_n_iter=1)], runs=1)
  assert _logged(caplog) == [('step = 1, step = 1', False)]


class _CountsFromOne(LoggingTensorHook):
  """Written against TF's class: counts the run before TF's check (1-based
  iterations), so its after_run logs without counting."""

  def before_run(self, run_context):
    self._iter_count += 1
    return super().before_run(run_context)

  def after_run(self, run_context, run_values):
    if self._should_trigger:
      self._log_tensors(run_values.results)


class _OwnTrigger(LoggingTensorHook):
  """Written against TF's class: before_run is TF's, plus the iteration kept."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.logged_at = []

  def before_run(self, run_context):
    self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
    if self._should_trigger:
      self.logged_at.append(self._iter_count)
      return tfmon.train.SessionRunArgs(self._current_tensors)
    return None


@pytest.mark.parametrize('steps_per_loop', [1, 4])
def test_subclasses_counting_iterations_themselves_log_as_on_tfs_class(
    caplog, steps_per_loop):
  step = _counting_step()
  shifted = _CountsFromOne(['step'], every_n_iter=10)
  own = _OwnTrigger(['loss'], every_n_iter=10)
  with tfmon.train.MonitoredSession(hooks=[shifted, own],
                                    steps_per_loop=steps_per_loop) as sess:
    for _ in range(25):
      sess.run(tfmon.train.op(step))
  # TF's class in TF1 graph mode: runs 0, 10 and 20 (steps 1, 11, 21) both.
  assert [text for text, _ in _logged(caplog) if text.startswith('step')] == [
      'step = 1', 'step = 11', 'step = 21']
  assert own.logged_at == [0, 10, 20]


def test_a_subclass_finds_tfs_timer_and_current_tensors_in_begin(caplog):

  class _Resets(LoggingTensorHook):

    def begin(self):
      super().begin()
      self._timer.reset()  # TF's NeverTriggerTimer, when only at_end logs
      self.tags = sorted(self._current_tensors)
      self.last = self._timer.last_triggered_step()

  hook = _Resets(['step'], at_end=True)
  step = _counting_step()
  _run([hook], runs=3, step=step)
  assert (hook.tags, hook.last) == (['step'], None)
  assert [text for text, _ in _logged(caplog)] == ['step = 3']


def test_a_list_of_graph_tensors_is_logged_as_tf1_logged_it(caplog):
  # TF1 took graph tensors in a list as it took names; tagged by their names.
  def run(graph, session, hook_class):
    values = []
    with graph.as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      loss = tf.cast(tf.compat.v1.assign_add(global_step, 1), tf.float32) / 4
      weight = tf.compat.v1.get_variable('w', initializer=3.0)
      recording = hook_class([loss, weight], every_n_iter=2, formatter=lambda v: (
          values.append({getattr(k, 'name', k): v for k, v in v.items()}) or 'logged'))
      with session(hooks=[recording, hook_class([loss], every_n_iter=2)]) as sess:
        for _ in range(3):
          sess.run(loss)
    return values, loss.name

  tf1_values, _ = run(tf.Graph(), tf.compat.v1.train.MonitoredSession,
                      tf.compat.v1.train.LoggingTensorHook)
  caplog.clear()
  values, name = run(tfmon.Graph(), tfmon.train.MonitoredSession, LoggingTensorHook)
  assert tf1_values == [{name: 0.25, 'w:0': 3.0}, {name: 0.75, 'w:0': 3.0}]
  assert values == tf1_values
  assert [line for line, _ in _logged(caplog) if line != 'logged'] == [
      f'{name} = 0.25', f'{name} = 0.75']
