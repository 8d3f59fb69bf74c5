"""Checkpointing on tf.train.Checkpoint and tf.train.CheckpointManager.

What Scaffold's `checkpoint` (alias `saver`) takes becomes one `tf.train.Checkpoint`
that always holds the global step; `restore` restores it at session creation and
`CheckpointWriter` saves it with v1's file names, never leaving a half-written
checkpoint where the `checkpoint` state file points.

A tf.data iterator in the checkpoint (`{'model': m, 'optimizer': o, 'iterator':
iter(dataset)}`) is saved with its position, shuffle buffer and random state, so a
resumed run continues with the next unseen batch (Estimator's
CheckpointInputPipelineHook, for any tf.data pipeline). Distributed iterators
cannot be checkpointed by TensorFlow and are refused with a message.

A checkpoint built from a dict writes through one traced function once its object
graph has stayed the same between two writes (`_TracedWriteCheckpoint`).
"""

import inspect
import os
import re
import sys
import time
import weakref

from tfmon import tf_logging as logging
import tensorflow as tf

from tfmon import checkpoint_files
from tfmon import paths
from tfmon import tf_internals
from tfmon import training_util
from tfmon import workers
from tfmon.compiled import graph_capture
from tfmon.compiled import meta_graph

_ONLY_GLOBAL_STEP_WARNING = (
    'Checkpoints will hold only the global step: nothing else was given to save. '
    "Pass checkpoint={'model': model, 'optimizer': optimizer} (a dict of "
    'trackables, a tf.train.Checkpoint or a tf.train.CheckpointManager) to '
    'MonitoredTrainingSession, Scaffold or CheckpointSaverHook(saver=...).')


def check_checkpoint_arg(value, arg_name='checkpoint'):
  """Raises TypeError unless `value` is something `as_checkpoint` takes."""
  if value is None or isinstance(value, (tf.train.Checkpoint, tf.train.CheckpointManager,
                                         tf.compat.v1.train.Saver)):
    return
  if isinstance(value, dict):
    for key, trackable in value.items():
      if not isinstance(key, str):
        raise TypeError(f'{arg_name} has the key {key!r} of type '
                        f'{type(key).__name__}; its keys are names (strings).')
      _check_trackables(trackable, f'{arg_name}[{key!r}]')
    return
  raise TypeError(
      f'{arg_name}={value!r} of type {type(value).__name__} cannot be '
      'checkpointed: pass a tf.train.Checkpoint, a tf.train.CheckpointManager, '
      "a dict of trackables such as {'model': model, 'optimizer': optimizer}, or "
      '(in a tfmon.Graph) a tf.compat.v1.train.Saver.')


def _check_trackables(value, path):
  """Raises TypeError unless `value` is a trackable, or dicts and lists of them
  (what tf.train.Checkpoint wraps and saves), naming the path of the first that
  is not."""
  if isinstance(value, dict):
    for key, item in value.items():
      _check_trackables(item, f'{path}[{key!r}]')
    return
  if isinstance(value, (list, tuple)):
    for index, item in enumerate(value):
      _check_trackables(item, f'{path}[{index}]')
    return
  if isinstance(value, tf.distribute.DistributedIterator):
    raise TypeError(
        f'{path} is a distributed iterator, which TensorFlow cannot '
        'checkpoint (iterators of strategy.experimental_distribute_dataset or '
        'distribute_datasets_from_function are not trackable). Leave it out '
        'and, on resume, skip what was consumed before distributing: '
        'dataset.skip(batches_seen), or checkpoint iter(dataset) of the '
        'undistributed dataset instead.')
  if not isinstance(value, tf_internals.Trackable):
    raise TypeError(
        f'{path} = {value!r} of type {type(value).__name__} cannot be '
        'checkpointed: a checkpoint holds trackables (Keras models and '
        'optimizers, tf.Module, tf.Variable, and tf.data iterators made by '
        'iter(dataset); a Python generator or iterator is not), alone or in '
        'dicts and lists, as tf.train.Checkpoint takes them.')


def as_checkpoint(value, arg_name='checkpoint'):
  """Returns `(tf.train.Checkpoint, CheckpointManager or None)` for `value`.

  Args:
    value: A `tf.train.Checkpoint`, a `tf.train.CheckpointManager`, a dict of
      trackables (`{'model': model, 'optimizer': optimizer}`; values may be
      dicts and lists of trackables, as tf.train.Checkpoint takes), or None.
    arg_name: The argument's name, for error messages.

  Returns:
    The checkpoint, with the global step added when it exists, and the
    CheckpointManager if one was given (its directory and file name then win).

  Raises:
    TypeError: for anything else.
  """
  check_checkpoint_arg(value, arg_name)
  manager = None
  if isinstance(value, tf.train.CheckpointManager):
    manager = value
    checkpoint = value.checkpoint
  elif isinstance(value, tf.train.Checkpoint):
    checkpoint = value
  elif isinstance(value, tf.compat.v1.train.Saver):
    # A TF1 Saver built in a captured graph: its variables, by their TF1 names,
    # and the graph with its SaverDef in the .meta, as that Saver wrote them.
    checkpoint = TF1SaverCheckpoint(variables=_saver_variables(value))
    checkpoint.meta_graph_of = graph_capture.current()
    checkpoint.saver_def = value.saver_def
  elif 'root' in (value or {}):
    checkpoint = tf.train.Checkpoint(**value)  # saves root's graph, not its own
  elif value is None and graph_capture.current() is not None:
    checkpoint = TF1SaverCheckpoint()  # a captured graph's default: TF1 Saver's
    checkpoint.meta_graph_of = graph_capture.current()
  else:
    checkpoint = _TracedWriteCheckpoint(**(value or {}))
  global_step = training_util.get_global_step()
  if global_step is not None and getattr(checkpoint, 'global_step', None) is None:
    checkpoint.global_step = global_step  # v1 always saved the global step
  if value is None:
    # v1 Saver's default: every variable the steps use, by name, added as the
    # steps are traced (add_step_variables); restored as they are added.
    checkpoint.variables = {}
  elif not value:
    logging.warning(_ONLY_GLOBAL_STEP_WARNING)
  return checkpoint, manager


def _saver_variables(saver):
  """`{TF1 name: variable}` of what a `tf.compat.v1.train.Saver` saves."""
  var_list = tf_internals.tf_state(saver, '_var_list')  # the Saver's own argument
  if var_list is None:
    var_list = tf.compat.v1.global_variables()
  if isinstance(var_list, dict):
    return dict(var_list)
  return {_variable_name(v): v for v in var_list}


def _variables_of(checkpoint):
  """The tf.Variables `checkpoint` saves (Keras 3 variables: the ones they wrap)."""
  variables = map(_tf_variable, tf.train.TrackableView(checkpoint).descendants())
  return [v for v in variables if v is not None]


def holds_unbuilt_objects(checkpoint):
  """Whether `checkpoint` holds a Keras object (a model, a layer, an optimizer)
  not built yet, whose variables its first use will create."""
  return any(getattr(trackable, 'built', True) is False
             for trackable in tf.train.TrackableView(checkpoint).descendants())


def _held_variables(checkpoint):
  """The ids of the tf.Variables `checkpoint` saves, and of the per-device
  components of its distributed ones (what a traced step under a strategy uses)."""
  held = set()
  for variable in _variables_of(checkpoint):
    held.add(id(variable))
    if isinstance(variable, tf.distribute.DistributedValues):
      held.update(map(id, variable.values))
  return held


def _variable_name(variable):
  return variable.name.split(':')[0]


def add_step_variables(checkpoint, variables):
  """Adds `variables` to a default checkpoint (`as_checkpoint(None)`) by name.

  What TF1's Saver did by default: save every variable, keyed by its name
  (`conv1/weights`; Keras 3 names variables by path). A checkpoint being
  restored restores each as it is added, so variables a step creates in its
  first trace are restored before it first runs.

  Raises:
    ValueError: if a TF1 checkpoint being restored has no variable of a
      trainable one's name (names listed).
  """
  held = _held_variables(checkpoint)
  by_name = checkpoint.variables
  clashes, added = [], []
  for variable in sorted(variables, key=_variable_name):
    if id(variable) in held:
      continue
    name = _variable_name(variable)
    if name in by_name:
      clashes.append(name)
      continue
    by_name[name] = variable
    added.append(variable)
  _assign_from_tf1(checkpoint, added)
  if clashes:
    logging.warning(
        'Checkpoints do not hold %s: another variable has the same name, and '
        'the default checkpoint (as TF1\'s Saver) keys variables by name. Name '
        "them apart (tf.Variable(..., name='...')) or pass checkpoint={...}.",
        sorted(set(clashes)))


def watch_step_variables(session, checkpoint_fn, default, warned):
  """Keeps a checkpoint in step with the variables `session`'s steps use.

  Args:
    session: A RawSession (anything else, e.g. under Keras fit, is left alone).
    checkpoint_fn: Returns the `tf.train.Checkpoint` (built on first use).
    default: Whether it is the default checkpoint (no `checkpoint=`): it then
      gets every variable the steps use (`add_step_variables`); otherwise a
      trained variable it misses is named in one warning.
    warned: A list shared by a checkpoint's watchers, for that one warning.
  """
  add_listener = getattr(session, 'add_variable_listener', None)
  if add_listener is None:
    return
  if default:
    add_listener(lambda variables: add_step_variables(checkpoint_fn(), variables))
  else:
    add_listener(lambda variables: warn_missing_step_variables(
        checkpoint_fn(), variables, warned))


def warn_missing_step_variables(checkpoint, variables, warned):
  """Warns once (per `warned` list) naming trainable `variables` not in `checkpoint`.

  Those it holds are restored from a TF1 checkpoint being restored, if any.
  """
  held = _held_variables(checkpoint)
  _assign_from_tf1(checkpoint, [v for v in variables if id(v) in held])
  missing = sorted(_variable_name(v) for v in variables
                   if getattr(v, 'trainable', False) and id(v) not in held)
  if missing and not warned:
    warned.append(True)
    logging.warning(
        'The step trains variables that checkpoint= does not hold, so a '
        'restarted job would train them from scratch: %s. Add the objects that '
        'own them to checkpoint={...}, or leave checkpoint= out to save every '
        'variable the step uses, as TF1\'s Saver did.', missing)


# Checkpoint -> the TF1 (name-based) checkpoint it restores from: variables
# created later (in a step's first trace) are restored as they are reported.
_tf1_restores = weakref.WeakKeyDictionary()


def _restore_tf1(checkpoint, path):
  """Restores a TF1 Saver's name-based checkpoint into `checkpoint` by name.

  Assigned here, eagerly, rather than by `tf.train.Checkpoint.restore`'s
  name-based mode, which restores a variable created later only when it is
  created eagerly: Keras builds optimizer variables inside a step's first trace.
  """
  _tf1_restores[checkpoint] = (path, tf.train.load_checkpoint(path))
  _assign_from_tf1(checkpoint, _variables_of(checkpoint))


def _assign_from_tf1(checkpoint, variables):
  """Assigns `variables` of `checkpoint` their values in the TF1 checkpoint it
  restores from, if any, by name.

  TF1 saved variables by name and optimizer state of its own (slots such as
  'w/Momentum'); a port's optimizer keeps other state (Keras' iterations and
  learning rate). So trainable variables must all be found; others not found
  keep their values, with a warning.

  Raises:
    ValueError: naming the trainable variables the TF1 checkpoint lacks, and
      what it holds.
  """
  restoring = _tf1_restores.get(checkpoint)
  if restoring is None:
    return
  path, reader = restoring
  # A Saver's var_list dict keys a variable by the name it restores from
  # ('w/ExponentialMovingAverage' for w, TF1's moving-averages evaluation).
  keys = {id(v): k for k, v in (getattr(checkpoint, 'variables', None) or {}).items()}
  missing, kept = [], []
  for variable in variables:
    name = keys.get(id(variable)) or _variable_name(variable)
    value = _tf1_value(reader, variable, name)
    if value is not None:
      variable.assign(value)
    else:
      (missing if variable.trainable else kept).append(name)
  if missing:
    raise ValueError(
        f'TF1 checkpoint {path} has no variables named {sorted(missing)}, which '
        f'this session trains; it holds {sorted(reader.get_variable_to_shape_map())}. '
        'Give the variables the names the TF1 graph gave them '
        "(tf.compat.v1.get_variable('conv1/weights', ...) or "
        "tf.Variable(..., name='conv1/weights')).")
  if kept:
    logging.warning('TF1 checkpoint %s does not hold %s (state TF1 did not '
                    'save); they keep their initial values.', path, sorted(kept))


def _tf1_value(reader, variable, name):
  """What a TF1 checkpoint holds for `variable`, found by name, or None.

  A part of a partitioned variable (`emb/part_0`, from `get_variable(...,
  partitioner=...)`, and its slots) is its slice of the whole, which TF1's
  Saver saved as one tensor under the whole's name (`emb`).
  """
  if reader.has_tensor(name):
    return reader.get_tensor(name)
  part = graph_capture.slice_of_whole(variable)
  if part is None or not reader.has_tensor(part[0]):
    return None
  return reader.get_tensor(part[0])[part[1]]


def require_created_in_scope(checkpoint):
  """Raises ValueError for a trainable variable of `checkpoint` that the strategy
  in scope did not create: replicas cannot update it, and TensorFlow
  fails at the first step with a bare AssertionError."""
  strategy = tf.distribute.get_strategy()
  for variable in _variables_of(checkpoint):
    if (variable.trainable and
        not strategy.extended.variable_created_in_scope(variable)):
      raise ValueError(
          f'Variable {variable.name!r} was created outside the scope of '
          f'{strategy!r}, which the session works under, so its replicas cannot '
          'update it. Create the model and optimizer inside '
          '`with strategy.scope():`.')


def _tf_variable(trackable):
  """The tf.Variable `trackable` is or (a Keras 3 variable) wraps, else None."""
  if isinstance(trackable, tf.Variable):
    return trackable
  keras = sys.modules.get('keras')  # a Keras variable exists only if Keras is loaded
  if keras is not None and isinstance(trackable, getattr(keras, 'Variable', ())):
    return trackable.value
  return None


_LOCAL_TASK = '/job:localhost/replica:0/task:0'  # this process, when eager


class _TracedWriteCheckpoint(tf.train.Checkpoint):
  """A tf.train.Checkpoint whose writes reuse one traced function.

  An eager write walks the whole object graph in Python and reads each variable
  with its own op: 9 ms for a small Keras MLP and its optimizer, of which the
  file I/O is a quarter. Once two writes in a row see the same object graph
  (the same objects under the same names), the write is traced, and each later
  write checks the graph (0.3 ms) and calls the traced function (2.7 ms); a
  changed graph is written eagerly, and traced again if it stays. CheckpointManager
  and Checkpoint.save/write reach it through `_write`, the method they share.

  Only graphs of variables, Keras variables and containers that save nothing of
  their own are traced: what they save is read when the function runs. Anything
  else is written eagerly: PythonState or a custom `_serialize_to_tensors` would
  be traced with its value at tracing, slot variables and the tf.Variable behind
  a distributed one are not in the graph checked, a tf.data iterator's options
  are not known in a traced function, and variables of other processes (a
  remote cluster) have not been tried. So are writes with CheckpointOptions.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._traced_writes = _TracedWrites()  # not a trackable: not saved

  def _write(self, file_prefix, options=None):
    write = self._traced_writes.function(self, options)
    if write is None:
      return super()._write(file_prefix, options)
    try:
      path = write(tf.constant(file_prefix)).numpy().decode()
    except tf.errors.OpError as e:
      # The eager write decides: it saves, or raises TensorFlow's own error (the
      # traced write's message is a graph traceback).
      path = super()._write(file_prefix, options)
      logging.warning('Checkpoints will be written eagerly: the traced write '
                      'failed where the eager one did not: %s', e)
      self._traced_writes.enabled = False
      return path
    # As Checkpoint._write: CheckpointManager records and sweeps in a callback.
    for callback in (options and options.experimental_write_callbacks) or ():
      if inspect.signature(callback).parameters:
        callback(path)
      else:
        callback()
    return path



class TF1SaverCheckpoint(tf.train.Checkpoint):
  """A checkpoint of variables by name, written as TF1's `Saver` wrote it.

  The default checkpoint of a captured graph (and a TF1 Saver's variables): its
  `variables` dict (TF1 names) and `global_step`, saved under those names with
  no object graph, so every TF1-era reader finds them by name: TF1's `Saver`
  and `MonitoredTrainingSession`, `tf.train.load_variable(path, 'w')`,
  `init_from_checkpoint`, TF <= 2.15's Estimator. A part of a partitioned
  variable is saved as TF1 saved it, as its slice of the whole. tfmon restores
  it by name (`is_tf1_checkpoint`). CheckpointManager writes it (`_write`), then
  records it in the state file, so a write that fails replaces nothing.

  With `meta_graph_of` set to a captured graph, each save also writes
  `<prefix>.meta` as TF1's Saver did (see meta_graph), made once per version of
  the graph; a graph it cannot be made of is saved without, said once.
  """

  meta_graph_of = None
  saver_def = None  # the SaverDef of the .meta (None: a default Saver's)
  _said_no_meta_graph = False

  def _write(self, file_prefix, options=None):
    names, slices, tensors = [], [], []
    entries = dict(getattr(self, 'variables', None) or {})
    global_step = getattr(self, 'global_step', None)
    if global_step is not None:
      entries.setdefault(_variable_name(global_step), global_step)
    for name, variable in sorted(entries.items()):
      part = tf_internals.save_slice_info(variable)
      names.append(part.full_name if part is not None else name)
      slices.append(part.spec if part is not None else '')
      tensors.append(variable.read_value() if hasattr(variable, 'read_value')
                     else tf.convert_to_tensor(variable))
    file_prefix = os.fspath(file_prefix)
    tf.raw_ops.SaveV2(prefix=file_prefix, tensor_names=names, shape_and_slices=slices,
                      tensors=tensors)
    meta = self._serialized_meta_graph()
    if meta is not None:
      with tf.io.gfile.GFile(file_prefix + '.meta', 'wb') as f:
        f.write(meta)
    for callback in (options.experimental_write_callbacks or [] if options else []):
      callback(file_prefix)
    return file_prefix

  def _serialized_meta_graph(self):
    if self.meta_graph_of is None:
      return None
    try:  # made once per version of the graph (meta_graph keeps it)
      return meta_graph.serialized_tf1_meta_graph_def(self.meta_graph_of, self.saver_def)
    except Exception as e:  # pylint: disable=broad-except
      if not self._said_no_meta_graph:
        self._said_no_meta_graph = True
        logging.warning('Checkpoints are written without the .meta file TF1 '
                        'wrote (tf.compat.v1.train.import_meta_graph reads it): '
                        'the graph could not be exported: %s', e)
      return None


class _TracedWrites:
  """A checkpoint's traced write and the object graph it was traced for (kept
  apart: what a tf.train.Checkpoint's attributes hold, it saves)."""

  def __init__(self):
    self.enabled = True
    self._graph = None  # the object graph of the last write
    self._alive = ()  # its objects and variables, so that their ids stay theirs
    self._write = None  # its traced write; None: not traced yet, False: untraceable

  def function(self, checkpoint, options):
    """The traced write for `checkpoint` as it is now, or None to write eagerly."""
    if not (self.enabled and _only_callbacks(options)):
      return None
    graph, objects, variables = _object_graph(checkpoint)
    if graph != self._graph:
      self._graph, self._alive, self._write = graph, (objects, variables), None
      return None
    if self._write is None:
      self._write = all(map(_read_when_run, objects)) and _trace_write(checkpoint)
    return self._write or None


def _trace_write(checkpoint):
  """`checkpoint`'s write as a concrete function of the file prefix, or False."""
  def write(prefix):
    # In a function TensorFlow places the object graph on '/device:CPU:0', apart
    # from the variables' '/job:localhost/...:CPU:0', and writes a shard for each.
    with tf.device(_LOCAL_TASK):
      return tf.train.Checkpoint._write(checkpoint, prefix)

  try:
    return tf.function(write, autograph=False).get_concrete_function(
        tf.TensorSpec([], tf.string))
  except Exception as e:  # pylint: disable=broad-except
    # Whatever TensorFlow cannot trace, its eager write still saves.
    logging.warning('Checkpoints will be written eagerly: tracing the write '
                    'failed: %s', e)
    return False


def _object_graph(root):
  """`root`'s object graph as a comparable value (each edge's parent, name and
  child, and the tf.Variable each Keras variable holds, by id), its objects and
  those tf.Variables."""
  objects, seen, edges = [root], {id(root)}, []
  for parent in objects:  # breadth first, as TensorFlow saves
    for name, child in tf.train.TrackableView.children(parent).items():
      edges.append((id(parent), name, id(child)))
      if id(child) not in seen:
        seen.add(id(child))
        objects.append(child)
  variables = [_tf_variable(trackable) for trackable in objects]
  return (tuple(edges), tuple(map(id, variables))), objects, variables


def _read_when_run(trackable):
  """Whether a traced write saves `trackable` as it is when the write runs."""
  variable = _tf_variable(trackable)
  if variable is not None:
    return (not isinstance(variable, tf.distribute.DistributedValues) and
            variable.device.startswith(_LOCAL_TASK + '/'))
  return tf_internals.saves_itself_as_read(trackable)


def _only_callbacks(options):
  """Whether `options` asks for nothing but write callbacks."""
  if options is None:
    return True
  fields = getattr(type(options), '__slots__', None)
  return fields is not None and not any(
      getattr(options, field) for field in fields
      if field != 'experimental_write_callbacks')


def restore(checkpoint, path):
  """Restores `checkpoint` from `path`, checking that what exists now matches.

  Objects created later (optimizer slots) are restored when they are created, as
  tf.train.Checkpoint does.

  Raises:
    RuntimeError: naming the file, if a file of the checkpoint is damaged
      (truncated, corrupted or missing).
    ValueError: if the checkpoint does not fit the objects to restore.
  """
  if not tf.io.gfile.exists(path + '.index'):
    raise ValueError(f'Checkpoint {path} does not exist (no {path}.index): give '
                     'the prefix of a saved checkpoint, such as '
                     "tf.train.latest_checkpoint(checkpoint_dir).")
  damage = find_damage(path)
  if damage is not None:
    raise RuntimeError(f'Checkpoint {path} is damaged: {damage[0]}: {damage[1]}. '
                       'Give a good checkpoint to restore.')
  _restore_checked(checkpoint, path)


def _restore_checked(checkpoint, path):
  logging.info('Restoring parameters from %s', paths.as_given(path))
  if checkpoint_files.is_tf1_checkpoint(path):
    _restore_tf1(checkpoint, path)
    return
  try:
    status = checkpoint.restore(path)
    status.assert_existing_objects_matched()
    if graph_capture.current() is not None:
      # A captured graph's variables all exist: values it lacks (an evaluation
      # graph restoring a training checkpoint's optimizer slots) are left, as
      # TF1's Saver left them, without TF's warning for each.
      status.expect_partial()
  except (AssertionError, tf.errors.NotFoundError, ValueError) as e:
    raise ValueError(
        f'Checkpoint {path} does not fit what this session restores: {e}. Restore '
        'into the same model and optimizer that wrote it, or point checkpoint_dir '
        'at a new directory.') from e


# What a damaged file is renamed to: `<file>` + this (+ `-<n>` if taken). The
# name matches no checkpoint pattern, so neither TensorFlow nor a later restore
# takes it for a checkpoint, and the CheckpointManager never deletes it.
DAMAGED_SUFFIX = '.damaged'
_STATE_FILE = 'checkpoint'


def restore_latest(checkpoint_fn, checkpoint_dir):
  """Restores the newest good checkpoint in `checkpoint_dir`; returns its path.

  Each candidate (the `checkpoint` state file's, newest first, then other
  checkpoints found on disk, newest step first) is read whole before anything
  is restored: TensorFlow checks every tensor's checksum as it reads. A damaged
  one (truncated, corrupted, or with a file missing), and a state file that
  cannot be read or names a checkpoint that does not exist, is logged naming
  the file, and its files are renamed aside with `DAMAGED_SUFFIX`, never
  deleted; the state file is then rewritten to name the checkpoint restored.

  Args:
    checkpoint_fn: Returns the `tf.train.Checkpoint` to restore; called only
      when there is a checkpoint to restore (a Scaffold builds it on first use).
    checkpoint_dir: The directory, or None.

  Returns:
    The path restored, or None if the directory holds no checkpoint (nor any
    damaged one set aside).

  Raises:
    RuntimeError: if the directory holds checkpoints (or damaged ones set
      aside) and none is good; the message lists what was tried. Training
      never silently starts from scratch over them.
    ValueError: if a good checkpoint does not fit what the session restores.
  """
  if not checkpoint_dir or not tf.io.gfile.isdir(checkpoint_dir):
    return None
  candidates, tried, state_good = _candidates(checkpoint_dir)
  for path in candidates:
    damage = find_damage(path)
    if damage is None:
      if tried or not state_good:
        _write_state(checkpoint_dir, path, candidates)
      _restore_checked(checkpoint_fn(), path)
      return path
    damaged_file, reason = damage
    renamed = _set_aside(_checkpoint_files(path))
    logging.error('Checkpoint %s is damaged: %s: %s. Its files are renamed aside '
                  '(%s); trying an older checkpoint.', path, damaged_file, reason,
                  ', '.join(renamed) or 'none found')
    tried.append(f'{path}: {damaged_file}: {reason} (renamed to '
                 f'{", ".join(renamed) or "nothing"})')
  set_aside = sorted(tf.io.gfile.glob(
      os.path.join(checkpoint_dir, '*' + DAMAGED_SUFFIX + '*')))
  if not tried and not set_aside:
    return None
  raise RuntimeError(
      f'No good checkpoint to restore in {checkpoint_dir}, which holds damaged '
      'ones; refusing to start training from scratch over them. Tried:\n  ' +
      '\n  '.join(tried or ['nothing new']) +
      ('\nDamaged files set aside: ' + ', '.join(set_aside) if set_aside else '') +
      '\nTo start from scratch, move the files out of the directory or point '
      'checkpoint_dir at a new one; to restore a checkpoint saved elsewhere, '
      'copy it in.')


def _candidates(checkpoint_dir):
  """`(prefixes to try newest first, what was set aside, whether the state
  file was good)`."""
  tried = []
  state_path = os.path.join(checkpoint_dir, _STATE_FILE)
  from_state = []
  state_good = False
  if tf.io.gfile.exists(state_path):
    problem = None
    try:
      state = tf.train.get_checkpoint_state(checkpoint_dir)
    except Exception as e:  # pylint: disable=broad-except
      state, problem = None, f'{type(e).__name__}: {e}'
    if state is None:
      problem = problem or 'not a readable checkpoint state (text CheckpointState)'
    else:
      from_state = [state.model_checkpoint_path] + list(
          reversed(state.all_model_checkpoint_paths))
      # get_checkpoint_state has joined relative names to checkpoint_dir.
      missing = [path for path in dict.fromkeys(from_state)
                 if not tf.io.gfile.exists(path + '.index')]
      if from_state[0] in missing:
        problem = f'names {from_state[0]}, whose .index file does not exist'
      from_state = [path for path in from_state if path not in missing]
    if problem is not None:
      renamed = _set_aside([state_path])
      logging.error('The checkpoint state file %s is damaged: %s. It is renamed '
                    'to %s; looking for checkpoints on disk.', state_path,
                    problem, ', '.join(renamed))
      tried.append(f'{state_path}: {problem} (renamed to {", ".join(renamed)})')
      from_state = []
    else:
      state_good = True
  on_disk = [path[:-len('.index')] for path in
             tf.io.gfile.glob(os.path.join(checkpoint_dir, '*.index'))
             if not tf.io.gfile.isdir(path)]
  on_disk.sort(key=_step_and_mtime, reverse=True)
  return list(dict.fromkeys(from_state + on_disk)), tried, state_good


def step_of(prefix):
  """The step a `<name>-<step>` checkpoint prefix names, or None."""
  tail = prefix.rsplit('-', 1)[-1] if prefix else ''
  return int(tail) if tail.isdigit() else None


def _step_and_mtime(prefix):
  """Sort key: the step a `<name>-<step>` prefix names, then the index's mtime."""
  step = step_of(prefix)
  step = -1 if step is None else step
  try:
    mtime = tf.io.gfile.stat(prefix + '.index').mtime_nsec
  except tf.errors.OpError:
    mtime = 0
  return step, mtime


def _checkpoint_files(prefix):
  return sorted(tf.io.gfile.glob(prefix + '.index') +
                tf.io.gfile.glob(prefix + '.data-*'))


def find_damage(prefix):
  """`(file, reason)` for the first damaged file of checkpoint `prefix`, else None.

  Reads every tensor (TensorFlow checks each one's checksum), so a truncated,
  corrupted or missing file is found before anything is restored: a restore
  that fails part-way would leave some variables restored and others not, and
  optimizer slots are restored only when created, after the first step.
  """
  index = prefix + '.index'
  if not tf.io.gfile.exists(index):
    return index, 'missing'
  try:
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
  except Exception as e:  # pylint: disable=broad-except
    if index not in str(e) and (not tf.io.gfile.glob(prefix + '.data-*') or
                                '.data-' in str(e)):
      return prefix + '.data-*', _first_line(e)
    return index, _first_line(e)
  data_files = sorted(tf.io.gfile.glob(prefix + '.data-*'))
  if not data_files:
    return prefix + '.data-*', 'no data file: missing'
  shards = {name.rsplit('-of-', 1)[-1] for name in data_files}
  expected = len(data_files) if len(shards) != 1 else int(shards.pop())
  if len(data_files) != expected:
    return prefix + '.data-*', (f'{expected} data files expected, '
                                f'{len(data_files)} found')
  with tf.device('CPU:0'):
    for name, dtype in dtypes.items():
      try:
        tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[name],
                             shape_and_slices=[''], dtypes=[dtype])
      except Exception as e:  # pylint: disable=broad-except
        return _damaged_data_file(data_files, e), (
            f'reading {name!r}: {_first_line(e)}')
  return None


def _damaged_data_file(data_files, error):
  """The data file an error reading a tensor names (one of them if unknown)."""
  if len(data_files) == 1:
    return data_files[0]
  shard = re.search(r'shard (\d+)', str(error))
  if shard and int(shard.group(1)) < len(data_files):
    return data_files[int(shard.group(1))]
  return ' or '.join(data_files)


def _first_line(error):
  message = str(error).strip().splitlines()[0] if str(error).strip() else ''
  # Drop TensorFlow's op prefix ('{{function_node ...}} ') and suffix.
  message = re.sub(r'^\{\{function_node [^}]*\}\}\s*', '', message)
  return f'{type(error).__name__}: {message}'


def _set_aside(files):
  """Renames `files` to `<file>.damaged` (or `.damaged-<n>`); returns the new names."""
  renamed = []
  for path in files:
    target = path + DAMAGED_SUFFIX
    n = 0
    while tf.io.gfile.exists(target):
      n += 1
      target = f'{path}{DAMAGED_SUFFIX}-{n}'
    tf.io.gfile.rename(path, target)
    renamed.append(target)
  return renamed


def _write_state(checkpoint_dir, latest, candidates):
  """Rewrites the state file to name `latest` and the good-looking older ones."""
  older = [path for path in candidates
           if path != latest and tf.io.gfile.exists(path + '.index') and
           _step_and_mtime(path) < _step_and_mtime(latest)]
  paths = sorted(older, key=_step_and_mtime) + [latest]
  # TensorFlow's own writer: a temporary file renamed over the state file.
  tf.compat.v1.train.update_checkpoint_state(
      checkpoint_dir, latest, all_model_checkpoint_paths=paths,
      **_timestamps(paths))
  state_path = os.path.join(checkpoint_dir, _STATE_FILE)
  logging.warning('The checkpoint state file %s now names %s, the newest good '
                  'checkpoint.', state_path, latest)


def _timestamps(paths):
  """The state file's timestamps for `paths`: their files' times, and a
  preserved time before them, so CheckpointManager keeps managing them."""
  times = [_step_and_mtime(path)[1] / 1e9 or time.time() for path in paths]
  return {'all_model_checkpoint_timestamps': times,
          'last_preserved_timestamp': min(times, default=0.) - 1.}


def _time_tf1_state(directory):
  """Adds timestamps to a state file TF1's Saver wrote (it wrote none).

  CheckpointManager keeps managing only the checkpoints whose timestamps are
  newer than the state's preserved time, so a TF1 directory's older
  checkpoints would drop out of the state file at tfmon's first save, and stay
  on disk for good; TF1's Saver continuing it kept them.
  """
  state = tf.train.get_checkpoint_state(directory)
  if state is None or state.all_model_checkpoint_timestamps:
    return
  paths = list(state.all_model_checkpoint_paths)
  if paths:
    tf.compat.v1.train.update_checkpoint_state(
        directory, state.model_checkpoint_path, all_model_checkpoint_paths=paths,
        **_timestamps(paths))


class CheckpointWriter:
  """Saves a checkpoint as `<directory>/<basename>-<step>` via CheckpointManager.

  A save that fails part-way leaves the `checkpoint` state file and the previous
  checkpoints as they were, removes the partial files of the failed step (never
  those of a complete checkpoint), and raises an error naming what failed.

  Made in the scope of a multi-worker strategy on a worker that is not the
  chief, it writes where MultiWorkerMirroredStrategy wants it: every worker
  takes part in a save, but only the chief's lands in `directory`; this one
  writes into `<directory>/workertemp_<task>` (Keras' layout) and removes it.

  Args:
    checkpoint: A `tf.train.Checkpoint`.
    manager: A `tf.train.CheckpointManager` to use as it is, or None.
    directory: Where checkpoints go when no manager is given.
    basename: The checkpoint file name (`model.ckpt`).
    max_to_keep: Checkpoints kept (None keeps all).
    keep_checkpoint_every_n_hours: Also keep one checkpoint per this many hours.
  """

  def __init__(self, checkpoint, manager=None, directory=None, basename='model.ckpt',
               max_to_keep=5, keep_checkpoint_every_n_hours=None):
    if manager is None and directory is not None:
      _time_tf1_state(directory)
    self.manager = manager or tf.train.CheckpointManager(
        checkpoint, directory=directory, max_to_keep=max_to_keep,
        keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
        checkpoint_name=basename)
    self.save_path = os.path.join(self.manager.directory, basename)
    if manager is not None:
      # The manager's own file name wins; it keeps it as its prefix.
      self.save_path = tf_internals.tf_state(manager, '_checkpoint_prefix', self.save_path)
    self._temporary = None  # a non-chief worker's manager of its temporary dir
    strategy = workers.current()
    if strategy is not None and not workers.is_chief(strategy):
      directory = os.path.join(self.manager.directory,
                               f'workertemp_{strategy.cluster_resolver.task_id}')
      self._temporary = tf.train.CheckpointManager(
          checkpoint, directory=directory, max_to_keep=1,
          checkpoint_name=os.path.basename(self.save_path))
      self.save_path = os.path.join(directory, os.path.basename(self.save_path))

  def latest_step_saved(self):
    return step_of(self.manager.latest_checkpoint)

  @logging.quiet_checkpoint_save()
  def save(self, step):
    prefix = f'{self.save_path}-{step}'
    if self._temporary is not None:
      try:
        return self._temporary.save(checkpoint_number=step)
      finally:
        if tf.io.gfile.exists(self._temporary.directory):
          tf.io.gfile.rmtree(self._temporary.directory)
    try:
      path = self.manager.save(checkpoint_number=step)
      _remove_swept_meta_files(self.save_path)
      return path
    except Exception as e:
      if prefix not in self.manager.checkpoints:
        try:
          _remove_partial_files(prefix)
        except (tf.errors.OpError, OSError) as cleanup_error:  # read-only, say
          logging.warning('Could not remove the partial files of %s: %s', prefix,
                          cleanup_error)
      raise RuntimeError(
          f'Saving checkpoint for step {step} into {prefix} failed: {e}. The '
          f'checkpoint state was not changed: the latest checkpoint is still '
          f'{self.manager.latest_checkpoint}.') from e


def _remove_swept_meta_files(save_path):
  """Removes the `.meta` files of checkpoints CheckpointManager deleted (it
  knows only `.index` and data files; TF1's Saver removed all three)."""
  for path in tf.io.gfile.glob(save_path + '-*.meta'):
    if not tf.io.gfile.exists(path[:-len('.meta')] + '.index'):
      tf.io.gfile.remove(path)


def _remove_partial_files(prefix):
  """Removes what a failed save of `prefix` wrote (gfile: works on any filesystem)."""
  for path in tf.io.gfile.glob(prefix + '.*'):
    if not tf.io.gfile.isdir(path):
      tf.io.gfile.remove(path)
  for path in tf.io.gfile.glob(prefix + '_temp*'):
    tf.io.gfile.rmtree(path)
