"""TF1's summary ops inside a step: v1 `Summary` protos, computed on record steps only.

A TF1 script calls `tf.compat.v1.summary.scalar(...)` while building its graph;
Session.run computed a summary only on the steps SummarySaverHook fetched it
(every `save_summaries_steps`), and wrote it as a v1 `Summary` proto: scalars as
`simple_value`, which TF1-era readers (`EventAccumulator.Scalars`,
tensor2tensor's early stopping) read. In a TF2 function, neither holds by
itself: TensorFlow forwards v1 calls under a default writer to TF2 ops, which
write tensor summaries those readers cannot see, and without one it builds the
v1 ops, which a function then runs every step.

So while a step is traced, `tf.compat.v1.summary`'s functions are replaced by
ones that build the same v1 proto inside a `tf.cond` on the step's `record`
input and write it with `tf.summary.experimental.write_raw_pb`: written as
TF1 wrote it, computed only on recording steps (a cond predicate otherwise, as
for `tf.summary` calls). They return an empty string tensor, as TensorFlow's own
forwarding does, so `merge` and `merge_all` still take them. With no summary
writer, they build nothing: TF1 computed no summary nobody fetched. Code that
bound a v1 function to another name before the session traced keeps
TensorFlow's behaviour.

TF1 also never computed what only a summary used (the tutorial's
`scalar('sparsity', tf.math.zero_fraction(x))`: ~2 ms of a 50 ms CIFAR-10
step). So the summaries a step body calls directly are written at its end, all
in one cond, and the stateless ops only they use are copied into that cond
(`tf.graph_util.import_graph_def`) and left unused outside it, for TensorFlow
to prune. Summaries called in nested graphs (a `tf.while_loop` body, an inner
`tf.function`) are written where they are called.
"""

import contextlib
import re
import threading

import tensorflow as tf

_INVALID_TAG_CHARACTERS = re.compile(r'[^-/\w\.]')
_TEXT_METADATA = None  # the 'text' plugin's SummaryMetadata, serialized on first use
_swap_lock = threading.RLock()


def _clean_tag(name):
  """TF1's tag cleaning: characters a tag cannot hold become '_'."""
  return _INVALID_TAG_CHARACTERS.sub('_', name).lstrip('/') if name else name


@contextlib.contextmanager
def _summary_scope(name, family):
  """TF1's summary_scope: yields the tag, `<scope>/<name>` or `<family>/<scope>`."""
  name, family = _clean_tag(name), _clean_tag(family)
  with tf.name_scope(name if family is None else f'{family}/{name}') as scope:
    tag = scope.rstrip('/')
    yield tag if family is None else f'{family}/{tag}'


def _is_other_replica():
  """TF1 wrote a summary from the first replica of a strategy only."""
  context = tf.distribute.get_replica_context()  # None in cross-replica context
  return bool(context and tf.get_static_value(context.replica_id_in_sync_group))


class _V1Summaries:
  """The replacements for one trace: writing under `record`, stamped `stamp`."""

  def __init__(self, record, stamp):
    self._record = record
    self._stamp = stamp
    # Summaries called in this graph (the step body's) are written at its end.
    self._graph = tf.compat.v1.get_default_graph()
    self._deferred = []  # (tag, make_summary, its tensors), in call order

  def _write(self, name, family, make_summary, *values):
    """Writes `make_summary(tag, *tensors)` on recording steps."""
    with _summary_scope(name, family) as tag:
      if self._record is not None and not _is_other_replica():
        # Converted here: a variable is read where the summary was called.
        tensors = [tf.convert_to_tensor(v) for v in values]
        if tf.compat.v1.get_default_graph() is self._graph:
          self._deferred.append((tag, make_summary, tensors))
        else:
          self._write_in_cond([(tag, make_summary, tensors)])
    return tf.constant(b'')

  def _write_in_cond(self, summaries, keep=None):
    """Writes `summaries` in one cond on `record`.

    With `keep` (the tensors the body outputs), the ops only the summaries use
    are copied into the cond, and left unused outside it.
    """
    stamp = self._stamp
    graph = tf.compat.v1.get_default_graph()
    tensors = [t for _, _, ts in summaries for t in ts]
    moved = [] if keep is None else _summary_only_ops(tensors, keep)

    def write():
      inner = iter(_copied(moved, tensors, graph))
      with tf.summary.record_if(True):  # the cond decided already
        for tag, make_summary, ts in summaries:
          tf.summary.experimental.write_raw_pb(
              make_summary(tag, *[next(inner) for _ in ts]), step=stamp)
      return tf.constant(True)

    tf.cond(self._record, write, lambda: tf.constant(False))

  def write_deferred(self, keep):
    """Writes the summaries the body called, at its end; call before it returns.

    Args:
      keep: The tensors the body outputs: what computes them is not moved.
    """
    if self._deferred:
      self._write_in_cond(self._deferred, keep)
      self._deferred = []

  def scalar(self, name, tensor, collections=None, family=None):
    del collections  # the session records every summary of a step
    return self._write(name, family, lambda tag, t: tf.raw_ops.ScalarSummary(
        tags=tag, values=t), tensor)

  def histogram(self, name, values, collections=None, family=None):
    del collections
    return self._write(name, family, lambda tag, v: tf.raw_ops.HistogramSummary(
        tag=tag, values=v), values)

  def image(self, name, tensor, max_outputs=3, collections=None, family=None):
    del collections
    return self._write(name, family, lambda tag, t: tf.raw_ops.ImageSummary(
        tag=tag, tensor=t, max_images=max_outputs), tensor)

  def audio(self, name, tensor, sample_rate, max_outputs=3, collections=None,
            family=None):
    del collections
    return self._write(name, family, lambda tag, t, rate: tf.raw_ops.AudioSummaryV2(
        tag=tag, tensor=t, sample_rate=rate, max_outputs=max_outputs),
                       tensor, tf.cast(sample_rate, tf.float32))

  def text(self, name, tensor, collections=None):
    del collections
    global _TEXT_METADATA
    if _TEXT_METADATA is None:
      _TEXT_METADATA = tf.compat.v1.SummaryMetadata(
          plugin_data=tf.compat.v1.SummaryMetadata.PluginData(
              plugin_name='text')).SerializeToString()
    return self._write(name, None, lambda tag, t: tf.raw_ops.TensorSummaryV2(
        tag=tag, tensor=t, serialized_summary_metadata=_TEXT_METADATA), tensor)

  def merge(self, inputs, collections=None, name=None):
    del inputs, collections, name  # each summary of the step is written already
    return tf.constant(b'')

  def merge_all(self, key=None, scope=None, name=None):
    del key, scope, name
    return tf.constant(b'')


def _summary_only_ops(tensors, keep):
  """The ops computing `tensors` that nothing but summaries uses, in creation
  order: TF1 ran them only on the steps that fetched a summary.

  Stateless ops without control inputs, whose every output is consumed by such
  ops only, none computing a tensor of `keep` or controlling another op.
  """
  keep_ops = {t.op for t in keep}

  def movable(op):
    return not (op.op_def.is_stateful or op.type == 'Placeholder' or
                op.control_inputs or op in keep_ops or
                any(t.dtype in (tf.resource, tf.variant) for t in op.outputs))

  ops = set()
  pending = [t.op for t in tensors]
  while pending:
    op = pending.pop()
    if op not in ops and movable(op):
      ops.add(op)
      pending.extend(t.op for t in op.inputs)
  if not ops:
    return []
  # An op is created after its inputs, so in reverse creation order every op's
  # consumers (and the ops it controls) are settled before it is.
  operations = next(iter(ops)).graph.get_operations()
  controlling = set()
  for op in reversed(operations):
    controlling.update(op.control_inputs)
    if op in ops and (op in controlling or any(
        consumer not in ops for t in op.outputs for consumer in t.consumers())):
      ops.discard(op)  # computed for something else: stays where it is
  return [op for op in operations if op in ops]


def _copied(ops, tensors, outer_graph):
  """`tensors` in the current (cond branch) graph: `ops` (in creation order)
  copied into it, what they take from outside captured."""
  if not ops:
    return tensors
  copied = set(ops)
  graph_def = tf.compat.v1.GraphDef()
  graph_def.versions.CopyFrom(outer_graph.graph_def_versions)
  input_map = {}
  for op in ops:
    node = graph_def.node.add()
    node.CopyFrom(op.node_def)
    if '_class' in node.attr:  # colocation with ops left outside
      del node.attr['_class']
    for t in op.inputs:
      if t.op not in copied and t.name not in input_map:
        input_map[t.name] = tf.identity(t)  # captured into the branch
  moved = [t for t in tensors if t.op in copied]
  copies = dict(zip((t.name for t in moved), tf.graph_util.import_graph_def(
      graph_def, input_map=input_map, return_elements=[t.name for t in moved],
      name='summary_inputs')))
  return [copies.get(t.name, t) for t in tensors]


_REPLACED = ('scalar', 'histogram', 'image', 'audio', 'text', 'merge', 'merge_all')


@contextlib.contextmanager
def written_on_record_steps(record, stamp):
  """Within, `tf.compat.v1.summary` calls write v1 protos when `record` holds.

  Yields the replacements: call their `write_deferred` before the body returns.

  Args:
    record: The trace's bool `record` input, or None when there is no summary
      writer (v1 calls then build nothing).
    stamp: The step the summaries carry.
  """
  module = tf.compat.v1.summary
  replacements = _V1Summaries(record, stamp)
  with _swap_lock:  # one trace at a time swaps the module's functions
    originals = {name: getattr(module, name) for name in _REPLACED}
    for name in _REPLACED:
      # Called from the user's autograph-converted step: not converted in turn
      # (tfmon's code has no tensor-dependent Python control flow).
      setattr(module, name, tf.autograph.experimental.do_not_convert(
          getattr(replacements, name)))
    try:
      yield replacements
    finally:
      for name, original in originals.items():
        setattr(module, name, original)
