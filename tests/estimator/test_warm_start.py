"""Estimator(warm_start_from=...): a new model starts from another's checkpoint."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tfmon import estimator


def model_fn(features, labels, mode, params):
  """A linear classifier; `params['scope']` names its variables' scope, and a
  rate of 0 keeps the variables as training started them."""
  with tf.compat.v1.variable_scope(params.get('scope', 'dense')):
    weights = tf.compat.v1.get_variable('kernel', [4, params.get('classes', 3)])
    bias = tf.compat.v1.get_variable('bias', [params.get('classes', 3)],
                                     initializer=tf.compat.v1.zeros_initializer())
  logits = tf.matmul(features, weights) + bias
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(params['rate']).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def _input():
  rng = np.random.default_rng(0)
  features = rng.normal(size=(32, 4)).astype(np.float32)
  labels = rng.integers(0, 3, size=32).astype(np.int64)
  return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)


@pytest.fixture(scope='module')
def trained_dir(tmp_path_factory):
  """A tfmon Estimator's model_dir (an object-based checkpoint) at step 20."""
  model_dir = str(tmp_path_factory.mktemp('source'))
  estimator.Estimator(model_fn, model_dir=model_dir, params={'rate': 0.5}).train(
      _input, steps=20)
  return model_dir


def _values(model_dir):
  model = estimator.Estimator(model_fn, model_dir=model_dir, params={'rate': 0.0})
  return {name: model.get_variable_value(name) for name in model.get_variable_names()}


def _frozen(model_dir, warm_start_from, **params):
  """An Estimator training nothing away (rate 0), warm-started."""
  return estimator.Estimator(model_fn, model_dir=str(model_dir),
                             params={'rate': 0.0, **params},
                             warm_start_from=warm_start_from)


def test_warm_starts_from_a_tf1_savers_checkpoint(tmp_path):
  # What TF1 left: a Saver's name-based checkpoint of the same model code.
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(_input()).get_next()
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, estimator.ModeKeys.TRAIN, {'rate': 0.5})
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for _ in range(7):
        session.run(spec.train_op)
      tf.compat.v1.train.Saver().save(session, str(tmp_path / 'tf1' / 'model.ckpt'),
                                      global_step=7)
  reader = tf.train.load_checkpoint(str(tmp_path / 'tf1' / 'model.ckpt-7'))

  model = _frozen(tmp_path / 'new', str(tmp_path / 'tf1' / 'model.ckpt-7'))
  model.train(_input, steps=2)
  assert model.latest_checkpoint().endswith('model.ckpt-2')  # the step is not warm-started
  for name in ('dense/kernel', 'dense/bias'):
    np.testing.assert_array_equal(model.get_variable_value(name), reader.get_tensor(name))


def test_warm_starts_from_a_tf1_saved_model(tmp_path):
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(_input()).get_next()
    tf.compat.v1.train.get_or_create_global_step()
    model_fn(features, labels, estimator.ModeKeys.TRAIN, {'rate': 0.5})
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      kernel = session.run(tf.compat.v1.trainable_variables()[0])
      builder = tf.compat.v1.saved_model.Builder(str(tmp_path / 'export'))
      builder.add_meta_graph_and_variables(session, ['serve'])
      builder.save()

  model = _frozen(tmp_path / 'new', str(tmp_path / 'export'))  # its variables/
  model.train(_input, steps=1)
  np.testing.assert_array_equal(model.get_variable_value('dense/kernel'), kernel)


def test_warm_starts_from_another_estimators_model_dir(tmp_path, trained_dir):
  source = _values(trained_dir)
  model = _frozen(tmp_path, trained_dir)  # a directory: its latest checkpoint
  model.train(_input, steps=3)
  assert model.latest_checkpoint().endswith('model.ckpt-3')
  np.testing.assert_array_equal(model.get_variable_value('dense/kernel'),
                                source['dense/kernel'])
  np.testing.assert_array_equal(model.get_variable_value('dense/bias'), source['dense/bias'])


def test_a_regex_chooses_trainable_variables_and_a_list_any(tmp_path, trained_dir):
  source = _values(trained_dir)
  kernel_only = _frozen(tmp_path / 'kernel', estimator.WarmStartSettings(
      trained_dir, vars_to_warm_start='.*kernel'))
  kernel_only.train(_input, steps=1)
  np.testing.assert_array_equal(kernel_only.get_variable_value('dense/kernel'),
                                source['dense/kernel'])
  np.testing.assert_array_equal(kernel_only.get_variable_value('dense/bias'), [0, 0, 0])

  # As in TF1, a list of regexes chooses among all global variables: the
  # global step too, when named.
  with_step = _frozen(tmp_path / 'step', estimator.WarmStartSettings(
      trained_dir, vars_to_warm_start=['dense/bias', 'global_step']))
  with_step.train(_input, steps=1)
  assert with_step.latest_checkpoint().endswith('model.ckpt-21')
  np.testing.assert_array_equal(with_step.get_variable_value('dense/bias'),
                                source['dense/bias'])
  assert not np.array_equal(with_step.get_variable_value('dense/kernel'),
                            source['dense/kernel'])


def test_renamed_variables_are_read_under_their_previous_names(tmp_path, trained_dir):
  source = _values(trained_dir)
  model = _frozen(tmp_path, estimator.WarmStartSettings(
      trained_dir, var_name_to_prev_var_name={'head/kernel': 'dense/kernel',
                                              'head/bias': 'dense/bias'}),
                  scope='head')
  model.train(_input, steps=1)
  np.testing.assert_array_equal(model.get_variable_value('head/kernel'),
                                source['dense/kernel'])
  np.testing.assert_array_equal(model.get_variable_value('head/bias'), source['dense/bias'])


def test_a_model_dir_with_a_checkpoint_resumes_instead(tmp_path):
  own = _frozen(tmp_path / 'own', None)
  own.train(_input, steps=2)
  kernel = own.get_variable_value('dense/kernel')
  # The source is not read (here it is gone), as a restarted TF1 job resumed.
  resumed = _frozen(tmp_path / 'own', str(tmp_path / 'removed_source'))
  resumed.train(_input, steps=1)
  assert resumed.latest_checkpoint().endswith('model.ckpt-3')
  np.testing.assert_array_equal(resumed.get_variable_value('dense/kernel'), kernel)


def test_an_embedding_is_remapped_to_its_new_vocabulary(tmp_path):
  (tmp_path / 'old.txt').write_text('a\nb\n')
  (tmp_path / 'new.txt').write_text('b\nc\na\n')
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('embedding', initializer=np.array(
        [[1., 1.], [2., 2.]], np.float32))
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(session, str(tmp_path / 'old' / 'model.ckpt'))

  def embedding_model_fn(features, mode):
    embedding = tf.compat.v1.get_variable('embedding', [4, 2])  # b, c, a, 1 OOV
    loss = tf.reduce_sum(tf.nn.embedding_lookup(embedding, features))
    return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=tf.compat.v1.assign_add(
        tf.compat.v1.train.get_global_step(), 1))

  model = estimator.Estimator(
      embedding_model_fn, model_dir=str(tmp_path / 'new'),
      warm_start_from=estimator.WarmStartSettings(
          str(tmp_path / 'old'), vars_to_warm_start=None,  # only the vocabulary's
          var_name_to_vocab_info={'embedding': estimator.VocabInfo(
              new_vocab=str(tmp_path / 'new.txt'), new_vocab_size=3,
              num_oov_buckets=1, old_vocab=str(tmp_path / 'old.txt'))}))
  model.train(lambda: tf.data.Dataset.from_tensors([0]).repeat(), steps=1)
  np.testing.assert_array_equal(model.get_variable_value('embedding'),
                                [[2, 2], [0, 0], [1, 1], [0, 0]])


def test_bad_settings_fail_before_training_naming_the_fix(tmp_path, trained_dir):
  with pytest.raises(ValueError, match='warm_start_from must be a string or a '
                     'WarmStartSettings'):
    estimator.Estimator(model_fn, warm_start_from=7)
  with pytest.raises(ValueError, match='`ckpt_to_initialize_from` MUST be set'):
    estimator.WarmStartSettings('')
  with pytest.raises(TypeError, match='vars_to_warm_start=7 must be a regex'):
    estimator.WarmStartSettings(trained_dir, vars_to_warm_start=7)

  missing = str(tmp_path / 'nowhere')
  with pytest.raises(ValueError, match=f"ckpt_to_initialize_from='{missing}': no "
                     "checkpoint is there. Give a checkpoint's path"):
    _frozen(tmp_path / 'a', missing).train(_input, steps=1)
  with pytest.raises(ValueError, match=r"head/kernel \(as dense/weights\): the checkpoint "
                     r"has no variable 'dense/weights'(.|\n)*var_name_to_prev_var_name"):
    _frozen(tmp_path / 'b', estimator.WarmStartSettings(
        trained_dir, var_name_to_prev_var_name={'head/kernel': 'dense/weights',
                                                'head/bias': 'dense/bias'}),
            scope='head').train(_input, steps=1)
  with pytest.raises(ValueError, match=r"dense/kernel: shape \[4, 5\], the checkpoint's "
                     r"'dense/kernel' has shape \[4, 3\](.|\n)*leave it out of "
                     'vars_to_warm_start'):
    _frozen(tmp_path / 'c', trained_dir, classes=5).train(_input, steps=1)
  with pytest.raises(ValueError, match=r"var_name_to_prev_var_name that were not used: "
                     r"\['dense/kernal'\]"):
    _frozen(tmp_path / 'd', estimator.WarmStartSettings(
        trained_dir, var_name_to_prev_var_name={'dense/kernal': 'dense/kernel'})).train(
            _input, steps=1)
  # Nothing was trained or written for the failed starts.
  assert not any(os.path.exists(tmp_path / d / 'checkpoint') for d in 'abcd')
