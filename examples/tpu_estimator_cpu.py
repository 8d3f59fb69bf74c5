r"""BERT's run_classifier.py, its TPUEstimator skeleton, on CPU with tfmon.

google-research/bert trains with `tf.contrib.tpu.TPUEstimator(use_tpu=FLAGS.use_tpu,
...)` and, off TPU, ran the same code on CPUs and GPUs. This is that program's
shape: flags, `input_fn_builder` reading `params["batch_size"]`,
`model_fn_builder` returning `TPUEstimatorSpec`s (scaffold_fn warm-starting from
`--init_checkpoint`, `eval_metrics` as `(metric_fn, tensors)`), `eval_results.txt`
and `test_results.tsv`. The changes TF 2.16+ forces: `tf.contrib.tpu` ->
`tfmon.estimator.tpu` (`tf.compat.v1.estimator.tpu` -> the same), `tf.estimator`
-> `tfmon.estimator`, and, to run without downloads, the data: token-id
"sentences" whose label says whether they hold more high ids than low ones, and
a bag-of-embeddings classifier in place of BERT's transformer.

  python examples/tpu_estimator_cpu.py --output_dir /tmp/classifier \
      --do_train --do_eval --do_predict
"""

import os

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from tfmon import estimator
from tfmon.estimator import tpu

FLAGS = flags.FLAGS
flags.DEFINE_string('output_dir', '/tmp/tpu_estimator_cpu',
                    'Where checkpoints, eval_results.txt and test_results.tsv go.')
flags.DEFINE_string('init_checkpoint', None, 'A checkpoint to start the embeddings from.')
flags.DEFINE_bool('do_train', False, 'Whether to train.')
flags.DEFINE_bool('do_eval', False, 'Whether to evaluate.')
flags.DEFINE_bool('do_predict', False, 'Whether to predict the test set.')
flags.DEFINE_integer('train_batch_size', 32, 'Total batch size for training.')
flags.DEFINE_integer('eval_batch_size', 8, 'Total batch size for eval.')
flags.DEFINE_integer('predict_batch_size', 8, 'Total batch size for predict.')
flags.DEFINE_float('learning_rate', 1.0, 'The initial learning rate.')
flags.DEFINE_float('num_train_epochs', 10.0, 'Training epochs.')
flags.DEFINE_integer('save_checkpoints_steps', 100, 'How often to save a checkpoint.')
flags.DEFINE_integer('iterations_per_loop', 10,
                     'Steps per TPU loop; off TPU, the step rate is logged every '
                     'ceil(100 / iterations_per_loop) steps, as TF logged it.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU (tfmon: must be False).')
flags.DEFINE_integer('num_tpu_cores', 8, 'TPU cores (read on TPU only).')

_VOCAB, _LENGTH, _LABELS = 20, 16, ['0', '1']


def synthetic_examples(count, seed):
  """Token-id sentences; the label: more ids >= 10 than below."""
  rng = np.random.default_rng(seed)
  input_ids = rng.integers(0, _VOCAB, size=(count, _LENGTH)).astype(np.int32)
  label_ids = ((input_ids >= _VOCAB // 2).sum(axis=1) > _LENGTH // 2).astype(np.int32)
  return input_ids, label_ids


def input_fn_builder(input_ids, label_ids, is_training, drop_remainder):
  """Creates an `input_fn` closure to be passed to TPUEstimator (BERT's)."""

  def input_fn(params):
    batch_size = params['batch_size']
    d = tf.data.Dataset.from_tensor_slices({'input_ids': input_ids,
                                            'label_ids': label_ids})
    if is_training:
      d = d.repeat().shuffle(buffer_size=100, seed=0)
    return d.batch(batch_size=batch_size, drop_remainder=drop_remainder)

  return input_fn


def create_model(is_training, input_ids, label_ids, num_labels):
  """A bag of embeddings in place of BERT's transformer; BERT's output layer."""
  embeddings = tf.compat.v1.get_variable(
      'bert/embeddings/word_embeddings', [_VOCAB, 16],
      initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.02))
  output_layer = tf.reduce_mean(tf.nn.embedding_lookup(embeddings, input_ids), axis=1)
  hidden_size = output_layer.shape[-1]
  output_weights = tf.compat.v1.get_variable(
      'output_weights', [num_labels, hidden_size],
      initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.compat.v1.get_variable('output_bias', [num_labels],
                                          initializer=tf.zeros_initializer())
  if is_training:
    output_layer = tf.nn.dropout(output_layer, rate=0.1)
  logits = tf.nn.bias_add(tf.matmul(output_layer, output_weights, transpose_b=True),
                          output_bias)
  probabilities = tf.nn.softmax(logits, axis=-1)
  log_probs = tf.nn.log_softmax(logits, axis=-1)
  one_hot_labels = tf.one_hot(label_ids, depth=num_labels, dtype=tf.float32)
  per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
  return tf.reduce_mean(per_example_loss), per_example_loss, logits, probabilities


def model_fn_builder(num_labels, init_checkpoint, learning_rate, use_tpu):
  """Returns `model_fn` closure for TPUEstimator (BERT's, less its optimizer)."""

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    input_ids, label_ids = features['input_ids'], features['label_ids']
    is_training = mode == estimator.ModeKeys.TRAIN
    total_loss, per_example_loss, logits, probabilities = create_model(
        is_training, input_ids, label_ids, num_labels)

    scaffold_fn = None
    if init_checkpoint:
      assignment_map = {'bert/': 'bert/'}
      if use_tpu:

        def tpu_scaffold():
          tf.compat.v1.train.init_from_checkpoint(init_checkpoint, assignment_map)
          return tf.compat.v1.train.Scaffold()

        scaffold_fn = tpu_scaffold
      else:
        tf.compat.v1.train.init_from_checkpoint(init_checkpoint, assignment_map)

    if mode == estimator.ModeKeys.TRAIN:
      train_op = tf.compat.v1.train.AdagradOptimizer(learning_rate).minimize(
          total_loss, global_step=tf.compat.v1.train.get_global_step())
      return tpu.TPUEstimatorSpec(mode=mode, loss=total_loss, train_op=train_op,
                                  scaffold_fn=scaffold_fn)
    if mode == estimator.ModeKeys.EVAL:

      def metric_fn(per_example_loss, label_ids, logits, is_real_example):
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        accuracy = tf.compat.v1.metrics.accuracy(
            labels=label_ids, predictions=predictions, weights=is_real_example)
        loss = tf.compat.v1.metrics.mean(values=per_example_loss,
                                         weights=is_real_example)
        return {'eval_accuracy': accuracy, 'eval_loss': loss}

      is_real_example = tf.ones(tf.shape(label_ids), dtype=tf.float32)
      eval_metrics = (metric_fn, [per_example_loss, label_ids, logits, is_real_example])
      return tpu.TPUEstimatorSpec(mode=mode, loss=total_loss, eval_metrics=eval_metrics,
                                  scaffold_fn=scaffold_fn)
    return tpu.TPUEstimatorSpec(mode=mode, predictions={'probabilities': probabilities},
                                scaffold_fn=scaffold_fn)

  return model_fn


def main(_):
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  if not FLAGS.do_train and not FLAGS.do_eval and not FLAGS.do_predict:
    raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be "
                     'True.')
  tf.io.gfile.makedirs(FLAGS.output_dir)
  is_per_host = tpu.InputPipelineConfig.PER_HOST_V2
  run_config = tpu.RunConfig(
      cluster=None, master=None, model_dir=FLAGS.output_dir,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      tpu_config=tpu.TPUConfig(iterations_per_loop=FLAGS.iterations_per_loop,
                               num_shards=FLAGS.num_tpu_cores,
                               per_host_input_for_training=is_per_host))
  train_ids, train_labels = synthetic_examples(512, seed=0)
  num_train_steps = int(len(train_ids) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
  model_fn = model_fn_builder(len(_LABELS), FLAGS.init_checkpoint, FLAGS.learning_rate,
                              FLAGS.use_tpu)
  classifier = tpu.TPUEstimator(
      use_tpu=FLAGS.use_tpu, model_fn=model_fn, config=run_config,
      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size)

  if FLAGS.do_train:
    tf.compat.v1.logging.info('***** Running training *****')
    tf.compat.v1.logging.info('  Num examples = %d', len(train_ids))
    tf.compat.v1.logging.info('  Batch size = %d', FLAGS.train_batch_size)
    tf.compat.v1.logging.info('  Num steps = %d', num_train_steps)
    classifier.train(input_fn=input_fn_builder(train_ids, train_labels, True, True),
                     max_steps=num_train_steps)

  if FLAGS.do_eval:
    eval_ids, eval_labels = synthetic_examples(128, seed=1)
    eval_steps = len(eval_ids) // FLAGS.eval_batch_size
    result = classifier.evaluate(
        input_fn=input_fn_builder(eval_ids, eval_labels, False, False),
        steps=eval_steps)
    with tf.io.gfile.GFile(os.path.join(FLAGS.output_dir, 'eval_results.txt'),
                           'w') as writer:
      tf.compat.v1.logging.info('***** Eval results *****')
      for key in sorted(result.keys()):
        tf.compat.v1.logging.info('  %s = %s', key, str(result[key]))
        writer.write('%s = %s\n' % (key, str(result[key])))

  if FLAGS.do_predict:
    test_ids, test_labels = synthetic_examples(40, seed=2)
    result = classifier.predict(
        input_fn=input_fn_builder(test_ids, test_labels, False, False))
    with tf.io.gfile.GFile(os.path.join(FLAGS.output_dir, 'test_results.tsv'),
                           'w') as writer:
      for prediction in result:
        writer.write('\t'.join(str(p) for p in prediction['probabilities']) + '\n')
    tf.compat.v1.logging.info('***** Predict results written *****')


if __name__ == '__main__':
  app.run(main)
