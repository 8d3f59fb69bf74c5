"""WarmStartSettings, and a model_fn's variables started from another checkpoint.

What TF1's Estimator did with `warm_start_from`: in `train`, when `model_dir`
held no checkpoint yet, it built the TRAIN graph and then called
`tf.compat.v1.train.warm_start`, which replaced the chosen variables'
initializers with reads from the checkpoint; the session's init op ran them,
and training began at global step 0 (the global step is not trainable, so the
default selection leaves it alone).

TF's `warm_start` cannot be used as it is here: on tfmon's graph capture every
variable is eager and initialized when made, and no init op runs it again, so
the replaced initializer (an assign op in the captured graph, set as the
variable's private `_initializer_op`) never runs, and TF's `warm_start` returns
having changed nothing. So `warm_start` below selects variables as TF's does
(same arguments, same regex rules), reads each value from the checkpoint by
its TF1 name, checks it, and assigns it eagerly before the session is made, as
tfmon restores a TF1 checkpoint (checkpointing.py). Every check runs before the
first assignment: bad settings leave the variables as they were.
"""

import collections
import os

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from tfmon import tf_internals
from tfmon import tf_logging as logging

VocabInfo = tf.compat.v1.train.VocabInfo


class WarmStartSettings(collections.namedtuple('WarmStartSettings', [
    'ckpt_to_initialize_from', 'vars_to_warm_start', 'var_name_to_vocab_info',
    'var_name_to_prev_var_name'])):
  """Which variables `Estimator.train` starts from another checkpoint, as TF1's.

  Args:
    ckpt_to_initialize_from: A checkpoint (`.../model.ckpt-100`), or a directory
      holding one (its latest is used), TF1's name-based or tfmon's; or a
      SavedModel directory (its variables).
    vars_to_warm_start: A regex (string) matched against the names of the
      TRAINABLE variables (default `'.*'`: all of them, not the global step nor
      optimizer slots); a list of regexes matched against all global variables;
      a list of variables; or None: only the variables of
      `var_name_to_vocab_info`.
    var_name_to_vocab_info: `{variable name: VocabInfo}`, for embeddings whose
      vocabulary changed: their rows are reordered to the new vocabulary.
    var_name_to_prev_var_name: `{variable name: its name in the checkpoint}`, for
      variables renamed since. It only maps names: `vars_to_warm_start` chooses.

  Raises:
    ValueError: no `ckpt_to_initialize_from`.
    TypeError: arguments of the wrong types.
  """

  def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start='.*',
              var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
    if not ckpt_to_initialize_from:
      raise ValueError('`ckpt_to_initialize_from` MUST be set in WarmStartSettings')
    if not isinstance(ckpt_to_initialize_from, (str, bytes, os.PathLike)):
      raise TypeError(f'WarmStartSettings ckpt_to_initialize_from='
                      f'{ckpt_to_initialize_from!r} must be a path.')
    _check_selection(vars_to_warm_start)
    for arg, mapping, value_type in (
        ('var_name_to_vocab_info', var_name_to_vocab_info, VocabInfo),
        ('var_name_to_prev_var_name', var_name_to_prev_var_name, str)):
      if not isinstance(mapping or {}, dict) or not all(
          isinstance(k, str) and isinstance(v, value_type)
          for k, v in (mapping or {}).items()):
        raise TypeError(f'WarmStartSettings {arg}={mapping!r} must be a dict of '
                        f'variable names to {value_type.__name__}s.')
    return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start,
                           var_name_to_vocab_info or {}, var_name_to_prev_var_name or {})


def _check_selection(vars_to_warm_start):
  if vars_to_warm_start is None or isinstance(vars_to_warm_start, str):
    return
  if isinstance(vars_to_warm_start, list) and (
      all(isinstance(v, str) for v in vars_to_warm_start) or
      all(isinstance(v, tf.Variable) for v in vars_to_warm_start)):
    return
  raise TypeError(
      f'vars_to_warm_start={vars_to_warm_start!r} must be a regex (string), a list '
      'of regexes, a list of variables, or None.')


def settings_from(warm_start_from):
  """The WarmStartSettings of an Estimator's `warm_start_from`, or None.

  A path becomes settings warm-starting every trainable variable from it, as in
  TF1; a SavedModel directory's path, from its `variables/variables`.

  Raises:
    ValueError: neither a path nor WarmStartSettings (TF1's type and message).
  """
  if warm_start_from is None or isinstance(warm_start_from, WarmStartSettings):
    return warm_start_from
  if isinstance(warm_start_from, (str, bytes, os.PathLike)):
    path = os.fsdecode(warm_start_from)
    variables = os.path.join(path, 'variables', 'variables')
    if tf.io.gfile.exists(variables + '.index'):
      logging.info('Warm-starting from a SavedModel')
      path = variables
    return WarmStartSettings(ckpt_to_initialize_from=path)
  raise ValueError('warm_start_from must be a string or a WarmStartSettings, '
                   f'instead got {type(warm_start_from)}')


def holds_checkpoint(directory):
  """Whether `directory` holds a checkpoint a session would restore (one the
  state file names, or any on disk): then TF1 did not warm-start."""
  return bool(tf.train.latest_checkpoint(directory) or
              tf.io.gfile.glob(os.path.join(directory, '*.index')))


def checkpoint_path(ckpt_to_initialize_from):
  """The checkpoint a warm start reads: the path, or a directory's latest.

  Raises:
    ValueError: there is no checkpoint there.
  """
  path = os.fsdecode(ckpt_to_initialize_from)
  if '://' not in path:  # a gs:// path stays as it is
    path = os.path.abspath(os.path.expanduser(path))
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
  elif tf.io.gfile.exists(path + '.index'):
    return path
  raise ValueError(
      f'Cannot warm-start from ckpt_to_initialize_from={ckpt_to_initialize_from!r}: '
      'no checkpoint is there. Give a checkpoint\'s path (such as '
      '.../model.ckpt-100, without the .index suffix) or a directory whose '
      '`checkpoint` file names one (an Estimator\'s model_dir after training).')


def checkpoint_keys(path):
  """`{TF1 variable name: checkpoint key}` of a checkpoint, TF1's or tfmon's."""
  reader = tf.train.load_checkpoint(path)
  if not reader.has_tensor('_CHECKPOINTABLE_OBJECT_GRAPH'):
    return {name: name for name in reader.get_variable_to_shape_map()}
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor('_CHECKPOINTABLE_OBJECT_GRAPH'))
  return {a.full_name: a.checkpoint_key for node in graph.nodes
          for a in node.attributes if a.full_name and a.full_name != 'save_counter'}


def warm_start(ckpt_to_initialize_from, vars_to_warm_start='.*',
               var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
  """Assigns the default graph's chosen variables their values in a checkpoint.

  `tf.compat.v1.train.warm_start`'s arguments and selection rules (see
  WarmStartSettings), for a `tfmon.Graph`'s (eager) variables.

  Raises:
    ValueError: no checkpoint at `ckpt_to_initialize_from`; a variable whose
      name (or previous name) the checkpoint lacks, or whose shape or dtype
      differs from the checkpoint's; names in `var_name_to_prev_var_name` or
      `var_name_to_vocab_info` that name no chosen variable. Nothing is
      assigned then.
  """
  settings = WarmStartSettings(ckpt_to_initialize_from, vars_to_warm_start,
                               var_name_to_vocab_info, var_name_to_prev_var_name)
  path = checkpoint_path(ckpt_to_initialize_from)
  logging.info('Warm-starting from: %s', path)
  keys = checkpoint_keys(path)
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  variables = _chosen_variables(vars_to_warm_start)
  if not variables:
    logging.warning('vars_to_warm_start=%r matches no variable of the graph: '
                    'nothing is warm-started.', vars_to_warm_start)
  renames, vocab_infos = settings.var_name_to_prev_var_name, settings.var_name_to_vocab_info
  for arg, mapping in (('var_name_to_prev_var_name', renames),
                       ('var_name_to_vocab_info', vocab_infos)):
    unused = sorted(set(mapping) - set(variables))
    if unused:  # TF1's message
      raise ValueError(
          f'You provided the following variables in {arg} that were not used: '
          f'{unused}.  Perhaps you misspelled them?  Here is the list of viable '
          f'variable names: {sorted(variables)}')

  assignments, remapped, problems = [], [], []
  for name, variable in variables.items():
    vocab_info = vocab_infos.get(name)
    if vocab_info is None and not vars_to_warm_start:
      continue  # None chooses only the variables with a vocabulary
    previous = renames.get(name, name)
    shown = name if previous == name else f'{name} (as {previous})'
    key = keys.get(previous)
    if key is None:
      problems.append(f'{shown}: the checkpoint has no variable {previous!r}')
      continue
    if dtypes[key].base_dtype != variable.dtype.base_dtype:
      problems.append(f'{shown}: dtype {variable.dtype.name}, the checkpoint\'s '
                      f'{previous!r} is {dtypes[key].name}')
      continue
    if vocab_info is not None:
      remapped.append((variable, _remapped(variable, path, key, vocab_info)))
      continue
    if not variable.shape.is_compatible_with(shapes[key]):
      problems.append(f'{shown}: shape {variable.shape.as_list()}, the '
                      f'checkpoint\'s {previous!r} has shape {shapes[key]}')
      continue
    assignments.append((variable, lambda key=key: reader.get_tensor(key)))
  if problems:
    raise ValueError(
        f'Cannot warm-start from {path}:\n  ' + '\n  '.join(problems) +
        f'\nIt holds {sorted(keys)}. Map each variable to the checkpoint\'s name '
        'for it in var_name_to_prev_var_name, or leave it out of '
        'vars_to_warm_start (a regex matching only the variables to start '
        'from the checkpoint).')
  with tf.init_scope():  # the graph's variables are eager: assign them now
    # Remapping reads the vocabulary files, which may fail: before any assignment.
    remapped = [(variable, compute()) for variable, compute in remapped]
    for variable, value in remapped:
      variable.assign(value)
    for variable, read in assignments:
      variable.assign(read())
  logging.info('Warm-started %d variables.', len(assignments) + len(remapped))


def _chosen_variables(vars_to_warm_start):
  """`{TF1 name: variable}` chosen by `vars_to_warm_start` (checked by
  WarmStartSettings) in the default graph, by TF's rules (regexes `re.match`
  the variables' names)."""
  if vars_to_warm_start is None or isinstance(vars_to_warm_start, str):
    chosen = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, scope=vars_to_warm_start)
  elif all(isinstance(v, str) for v in vars_to_warm_start):
    chosen = [variable for regex in vars_to_warm_start for variable in
              tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,
                                          scope=regex)]
  else:
    chosen = vars_to_warm_start
  return {variable.name.split(':')[0]: variable for variable in chosen}


def _remapped(variable, path, key, vocab_info):
  """A function computing `variable`'s value from the checkpoint's `key`, its
  rows (axis 0) or columns (axis 1) reordered from the old vocabulary to the
  new one, as TF's warm_start computed it; entries the old vocabulary lacks
  get `backup_initializer`'s values (default zeros)."""
  if not (vocab_info.new_vocab and vocab_info.new_vocab_size and vocab_info.old_vocab):
    raise ValueError(f'{vocab_info!r}: a VocabInfo needs new_vocab, new_vocab_size '
                     'and old_vocab.')
  if vocab_info.axis not in (0, 1) or variable.shape.rank != 2:
    raise ValueError(f'Cannot warm-start {variable.name} with {vocab_info!r}: only '
                     'a matrix, along axis 0 or 1, is remapped to a new vocabulary.')
  rows, columns = variable.shape.as_list()
  if vocab_info.axis == 0:
    vocabulary = dict(
        new_row_vocab_size=vocab_info.new_vocab_size, new_col_vocab_size=columns,
        old_row_vocab_size=vocab_info.old_vocab_size,
        old_row_vocab_file=vocab_info.old_vocab, new_row_vocab_file=vocab_info.new_vocab,
        num_row_oov_buckets=vocab_info.num_oov_buckets)
  else:
    vocabulary = dict(
        new_row_vocab_size=rows, new_col_vocab_size=vocab_info.new_vocab_size,
        old_col_vocab_file=vocab_info.old_vocab, new_col_vocab_file=vocab_info.new_vocab,
        num_col_oov_buckets=vocab_info.num_oov_buckets)
  initializer = tf_internals.load_and_remap_matrix_initializer(
      ckpt_path=path, old_tensor_name=key,
      initializer=vocab_info.backup_initializer, **vocabulary)
  return lambda: initializer(shape=[rows, columns], partition_info=None)
