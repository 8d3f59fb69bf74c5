"""The TRAIN graph of a `model_fn` under `RunConfig(train_distribute=
tf.distribute.MirroredStrategy(...))`, built as TF <= 2.15's Estimator built
it (`_actual_train_model_distributed`):

  - in the strategy's scope, with v1 optimizers dividing a mean loss by the
    number of replicas (TF's private flag for Estimator), so that the
    gradients they sum across replicas in `apply_gradients` are the mean's:
    one update of each (mirrored) variable a step;
  - `input_fn` is called once (per worker), and its dataset's elements dealt
    to the process's replicas in turn, one whole element (a per-replica
    batch) each, as TF's `make_input_fn_iterator` dealt them: the batch size
    of `input_fn` is the per-replica one;
  - `model_fn` is called once per replica (`call_for_each_replica`); the spec
    the session runs has the process's replicas' losses averaged (summed
    when the optimizers did not scale them: a SUM-reduced loss, as TF
    reported it), one op running every replica's `train_op`, and the first
    replica's hooks and scaffold.
Under MultiWorkerMirroredStrategy each worker process builds its replicas so;
their gradients are summed across all workers' replicas.
Variables are mirrored and listed once under their TF1 names (replica 0's),
so checkpoints restore into the unreplicated graphs of evaluation, prediction
and export.
"""

import contextlib

import tensorflow as tf

from tfmon import tf_internals
from tfmon import workers
from tfmon.estimator.spec import EstimatorSpec, ModeKeys


def replicas(strategy):
  """How many replicas `strategy` (or None) trains on, in all its workers."""
  return 1 if strategy is None else strategy.num_replicas_in_sync


def local_replicas(strategy):
  """How many of `strategy`'s replicas are this process's."""
  return 1 if strategy is None else len(strategy.extended.worker_devices)


def input_context(strategy):
  """The `tf.distribute.InputContext` TF's Estimator gave a training
  `input_fn` under `strategy`: one input pipeline per worker."""
  count = workers.count(strategy)
  return tf.distribute.InputContext(
      num_input_pipelines=count,
      input_pipeline_id=workers.index(strategy) if count > 1 else 0,
      num_replicas_in_sync=replicas(strategy))


def scope(strategy):
  """`strategy`'s scope when it has several replicas (the global step is
  mirrored in it, as TF's Estimator made it), else nothing."""
  return strategy.scope() if replicas(strategy) > 1 else contextlib.nullcontext()


def train_spec(strategy, dataset, call_model_fn):
  """`(spec, iterator initializer)`: the TRAIN spec of `call_model_fn(features,
  labels, mode)` built once per replica of `strategy`, on elements of
  `dataset` dealt to the replicas in turn (see the module doc).

  Raises:
    TypeError: `dataset` is not a `tf.data.Dataset`.
  """
  if not isinstance(dataset, tf.data.Dataset):
    raise TypeError(
        f'input_fn returned {dataset!r}: under train_distribute={strategy!r} it must '
        'return a tf.data.Dataset of per-replica batches (features, labels), which '
        'the replicas take in turn, as TF\'s Estimator required.')
  graph = tf.compat.v1.get_default_graph()
  iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
  elements, previous = [], []
  local = local_replicas(strategy)
  for _ in range(local):
    with tf.control_dependencies(previous):  # replica i takes the i-th element
      element = iterator.get_next()
    previous = tf.nest.flatten(element)
    elements.append(element if isinstance(element, tuple) and len(element) == 2
                    else (element, None))
  specs = {}

  def replica_spec(features, labels):
    context = tf.distribute.get_replica_context()
    spec = call_model_fn(features, labels, ModeKeys.TRAIN)
    specs[int(tf.get_static_value(context.replica_id_in_sync_group))] = spec
    return spec.loss, spec.train_op

  registered = set()
  with strategy.scope(), tf_internals.scale_loss_as_estimator(strategy), \
      tf_internals.custom_gradients_registered(registered):
    inputs = strategy.experimental_distribute_values_from_function(
        lambda context: elements[context.replica_id_in_sync_group % local])
    losses, train_ops = strategy.extended.call_for_each_replica(
        lambda element: replica_spec(*element), args=(inputs,))
    # Over this process's replicas, with no collective op: a chief-only hook
    # (the summary saver) fetches it alone; each worker reports its own loss.
    losses = strategy.experimental_local_results(losses)
    loss = tf.math.add_n(losses)
    if tf_internals.loss_scaled_by_optimizer(graph):
      loss /= len(losses)
    train_op = tf.group(*[t if isinstance(t, tf.Operation) else t.op
                          for t in strategy.experimental_local_results(train_ops)])
  # The all-reduces' gradients would hold the graph until the process ends
  # (tf_internals.custom_gradients_registered); its gradients are built.
  tf_internals.forget_custom_gradients(registered)
  first = specs[min(specs)]  # this process's first replica's
  graph.strategy = strategy
  return EstimatorSpec(
      mode=ModeKeys.TRAIN, loss=loss, train_op=train_op,
      training_hooks=first.training_hooks,
      training_chief_hooks=first.training_chief_hooks,
      scaffold=first.scaffold), iterator.initializer
