"""capture_graph: TF1 graph code built in a function, once per replica of a
`tf.distribute` strategy, as TF <= 2.15's Estimator built its `model_fn`
under `train_distribute`, in one process or (MultiWorkerMirroredStrategy) in
each worker process.

What a graph built under `strategy` promises:
  - `build` runs once per replica (`call_for_each_replica`) in one captured
    graph, inside the strategy's scope, replica 0 first and with TF1's names
    (replica i > 0 builds in 'replica_<i>/'); variables are mirrored, listed
    once in the collections under replica 0's (TF1's) names, so checkpoints
    hold one copy each and restore into the unreplicated graph;
  - v1 optimizers divide a mean loss by the number of replicas, as TF 1.x did
    (TF 2 does only under Estimator's private flag), and sum the replicas'
    gradients in `apply_gradients`: one update of each variable a step, the
    weights one device trains on the whole batch;
  - each value `build` returns that differs across replicas is replaced by
    what a session runs on one device (`_one_value`): an operation, or what a
    v1 optimizer's `minimize` returns, by one op running every replica's; a
    placeholder by replica 0's, whose feed the session splits along its first
    axis, a share per replica (`Graph.replica_feeds`; a placeholder fed by
    name, which `build` did not return, too); a floating-point
    scalar (the loss) by its mean across replicas; any other tensor by the
    replicas' values concatenated along the first axis (their shares of the
    batch); what is the same everywhere (a variable) stays. These are over
    this process's replicas, with no collective op: each worker of a
    MultiWorkerMirroredStrategy sees its own loss, as TF1's workers and TF
    2.15's Estimator did, and a hook on one worker (the chief's) may fetch it
    alone;
  - v1 summaries are replica 0's (TF skips the others'), as are graph
    elements found by name ('loss:0' is replica 0's);
  - `build` taking an `input_context` argument gets a
    `tf.distribute.InputContext` per replica (one input pipeline each), by
    which it shards its `tf.data` input: `dataset.batch(per_replica_batch)
    .shard(ctx.num_input_pipelines, ctx.input_pipeline_id)` hands replica i
    the i-th of every `num_replicas` batches, as TF's distributed datasets
    did.
"""

import inspect
import logging

import tensorflow as tf

from tfmon import tf_internals
from tfmon.compiled import graph_capture


def capture_graph(build, strategy=None):
  """Runs `build()` inside a new `tfmon.Graph`; returns `(graph, what build
  returned)`.

  For scripts that build their graph in a function: create the session inside
  `with graph.as_default():` to run it.

  Args:
    build: Builds the graph; returns what the script fetches and feeds (a nest).
      Given a strategy, it may take an `input_context` argument (see the
      module doc).
    strategy: A `tf.distribute.MirroredStrategy`, `OneDeviceStrategy` or
      `MultiWorkerMirroredStrategy`: `build` runs once per replica of this
      process, and what it returns is made one value each (see the module
      doc). The session then runs under it; across workers, each worker runs
      the same script, feeding its share of the batch.

  Returns:
    `(graph, outputs)`.

  Raises:
    TypeError: `strategy` is not a `tf.distribute.Strategy`.
    ValueError: a strategy of parameter servers or TPUs.
  """
  graph = graph_capture.Graph()
  if strategy is None:
    with graph.as_default():
      return graph, build()
  _check_strategy(strategy)
  takes_context = 'input_context' in inspect.signature(build).parameters
  replicas = strategy.num_replicas_in_sync

  @tf.autograph.experimental.do_not_convert  # TF1 graph code, as TF1 ran it
  def build_replica():
    if not takes_context:
      return build()
    replica = tf.get_static_value(
        tf.distribute.get_replica_context().replica_id_in_sync_group)
    return build(input_context=tf.distribute.InputContext(
        num_input_pipelines=replicas, input_pipeline_id=int(replica),
        num_replicas_in_sync=replicas))

  registered = set()
  with graph.as_default(), strategy.scope(), \
      tf_internals.scale_loss_as_estimator(strategy), \
      tf_internals.custom_gradients_registered(registered):
    outputs = strategy.extended.call_for_each_replica(build_replica)
    outputs = tf.nest.map_structure(
        lambda value: _one_value(graph, strategy, value), outputs)
  # The all-reduces' gradients, registered for good, would hold the graph and
  # its resources until the process ends; the graph's gradients are built.
  tf_internals.forget_custom_gradients(registered)
  _split_feeds_by_name(graph, replicas)
  if replicas > 1 and not takes_context and any(
      op.type in _ITERATORS for op in graph.get_operations()):
    logging.getLogger('tensorflow').warning(
        'capture_graph: build makes a tf.data iterator and takes no input_context, '
        'so each of the %d replicas reads the whole dataset (the same batches). Take '
        'input_context and shard by it: dataset.batch(per_replica_batch).shard('
        'input_context.num_input_pipelines, input_context.input_pipeline_id).',
        replicas)
  graph.strategy = strategy
  return graph, outputs


_ITERATORS = ('OneShotIterator', 'IteratorV2', 'Iterator')


def _check_strategy(strategy):
  if not isinstance(strategy, tf.distribute.Strategy):
    raise TypeError(f'strategy={strategy!r} is not a tf.distribute.Strategy.')
  if not isinstance(strategy, (tf.distribute.MirroredStrategy,
                               tf.distribute.OneDeviceStrategy,
                               tf.distribute.MultiWorkerMirroredStrategy)):
    raise ValueError(
        f'strategy={strategy!r}: a captured graph runs under MirroredStrategy, '
        'OneDeviceStrategy or MultiWorkerMirroredStrategy (docs/distribution.md).')


def _split_feeds_by_name(graph, replicas):
  """Splits the feeds of every placeholder `build` made, not only those it
  returned: TF1 scripts feed by name ('x:0' is replica 0's, whose replica k
  counterpart call_for_each_replica named 'replica_k/x')."""
  captured = graph.captured_placeholder_ids()
  ops = {op.name: op for op in graph.get_operations()}
  for name, op in ops.items():
    if (op.type != 'Placeholder' or id(op) in captured or name.startswith('replica_')
        or id(op.outputs[0]) in graph.replica_feeds):
      continue
    others = [ops.get(f'replica_{k}/{name}') for k in range(1, replicas)]
    if all(other is not None and other.type == 'Placeholder' for other in others):
      graph.replica_feeds[id(op.outputs[0])] = [op.outputs[0]] + [
          other.outputs[0] for other in others]


def _one_value(graph, strategy, value):
  """What the session runs for `value`, one of `build`'s returns: see the
  module doc."""
  if _is_unread_update(value):  # minimize's, with one replica in this process
    return value.op
  if not isinstance(value, tf.distribute.DistributedValues) or isinstance(
      value, tf.Variable):
    return value
  values = list(strategy.experimental_local_results(value))
  if all(v is values[0] for v in values):
    return values[0]
  if all(isinstance(v, tf.Operation) or _is_update(v) for v in values):
    return tf.group(*[v if isinstance(v, tf.Operation) else v.op for v in values])
  if not all(isinstance(v, tf.Tensor) for v in values):
    return values[0]  # a sparse tensor, a hook, an object: replica 0's
  if all(v.op.type == 'Placeholder' for v in values):
    graph.replica_feeds[id(values[0])] = values
    return values[0]
  if values[0].shape.rank == 0:
    if values[0].dtype.is_floating:
      return tf.math.add_n(values) / len(values)
    return values[0]
  return tf.concat(values, axis=0)


def _is_unread_update(value):
  """Whether `value` is a variable's update not yet read (what `assign_add`
  returns in graph code): what a v1 optimizer's `minimize` returns under a
  strategy of one replica in this process, MultiWorkerMirroredStrategy's on
  one device. It runs as the update's op, as TF1's `minimize` returned."""
  return isinstance(value, tf.Variable) and getattr(value, 'op', None) is not None and (
      value.op.type in ('AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp'))


def _is_update(tensor):
  """Whether `tensor` is what a v1 optimizer's `minimize` or `apply_gradients`
  returns in a replica: a read of the global step after its update."""
  if not isinstance(tensor, tf.Tensor) or tensor.op.type != 'Identity':
    return False
  read = tensor.op.inputs[0].op
  return read.type == 'ReadVariableOp' and bool(read.control_inputs)
