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

  def _write(self, name, family, make_summary):
    with _summary_scope(name, family) as tag:
      if self._record is not None and not _is_other_replica():
        stamp = self._stamp

        def write():
          with tf.summary.record_if(True):  # the cond decided already
            return tf.summary.experimental.write_raw_pb(make_summary(tag), step=stamp)

        tf.cond(self._record, write, lambda: tf.constant(False))
    return tf.constant(b'')

  def scalar(self, name, tensor, collections=None, family=None):
    del collections  # the session records every summary of a step
    return self._write(name, family, lambda tag: tf.raw_ops.ScalarSummary(
        tags=tag, values=tensor))

  def histogram(self, name, values, collections=None, family=None):
    del collections
    return self._write(name, family, lambda tag: tf.raw_ops.HistogramSummary(
        tag=tag, values=values))

  def image(self, name, tensor, max_outputs=3, collections=None, family=None):
    del collections
    return self._write(name, family, lambda tag: tf.raw_ops.ImageSummary(
        tag=tag, tensor=tensor, max_images=max_outputs))

  def audio(self, name, tensor, sample_rate, max_outputs=3, collections=None,
            family=None):
    del collections
    return self._write(name, family, lambda tag: tf.raw_ops.AudioSummaryV2(
        tag=tag, tensor=tensor, sample_rate=sample_rate, max_outputs=max_outputs))

  def text(self, name, tensor, collections=None):
    del collections
    global _TEXT_METADATA
    if _TEXT_METADATA is None:
      _TEXT_METADATA = tf.compat.v1.SummaryMetadata(
          plugin_data=tf.compat.v1.SummaryMetadata.PluginData(
              plugin_name='text')).SerializeToString()
    return self._write(name, None, lambda tag: tf.raw_ops.TensorSummaryV2(
        tag=tag, tensor=tensor, serialized_summary_metadata=_TEXT_METADATA))

  def merge(self, inputs, collections=None, name=None):
    del inputs, collections, name  # each summary of the step is written already
    return tf.constant(b'')

  def merge_all(self, key=None, scope=None, name=None):
    del key, scope, name
    return tf.constant(b'')


_REPLACED = ('scalar', 'histogram', 'image', 'audio', 'text', 'merge', 'merge_all')


@contextlib.contextmanager
def written_on_record_steps(record, stamp):
  """Within, `tf.compat.v1.summary` calls write v1 protos when `record` holds.

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
      yield
    finally:
      for name, original in originals.items():
        setattr(module, name, original)
