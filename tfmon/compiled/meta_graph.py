"""The `model.ckpt-N.meta` TF1's Saver wrote, for a captured graph.

A captured graph's variables are eager: in its GraphDef each is a placeholder
of a resource handle, which `tf.compat.v1.train.import_meta_graph` users could
not restore into. The MetaGraphDef made here is the graph as TF1 had it: each
such placeholder is a `VarHandleOp` of the variable's name again, with TF1's
read (`<name>/Read/ReadVariableOp`) and initializer (`<name>/Assign`, zeros: the
values come from the checkpoint), a `Saver`'s save and restore ops and
`saver_def` naming each variable as the checkpoint does, and the graph's
collections. Importing it into a `tf.Graph` and restoring `model.ckpt-N` gives
the trained model, run by op and tensor names as in TF1.

The nodes of the variables and of the Saver are written as NodeDefs, as TF1's
named them: building them with TensorFlow's Python graph code (the Saver's, or
the whole graph imported) took over a second on the CIFAR-10 tutorial's graph.

Values captured from eager code other than variables (an input pipeline's
iterator, constants) stay placeholders: feed them.
"""

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import node_def_pb2
from tensorflow.core.framework import variable_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.protobuf import saver_pb2

from tfmon import tf_internals

_VARIABLE_COLLECTIONS = (
    tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES,
    tf.compat.v1.GraphKeys.LOCAL_VARIABLES, tf.compat.v1.GraphKeys.MODEL_VARIABLES,
    tf.compat.v1.GraphKeys.MOVING_AVERAGE_VARIABLES)


def tf1_meta_graph_def(graph, saver_def=None):
  """A MetaGraphDef of the captured `graph` as TF1's Saver wrote it.

  Args:
    graph: A captured graph.
    saver_def: The SaverDef of the TF1 Saver the graph code built, whose ops
      the graph holds (a Scaffold's `saver=`); None: a Saver of the global
      variables is added, as TF1's default Saver.

  Raises:
    ValueError: the graph has ops of the names TF1's variables and Saver take.
  """
  graph_def = graph.as_graph_def(add_shapes=True)
  variables = _as_variable_handles(graph, graph_def)
  # TF1's default Saver saved the global variables, not the local ones (v1
  # metrics' totals), which the checkpoint does not hold either.
  local = {id(v) for v in graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)}
  saved = [name for name, variable in variables.items()
           if id(variable) not in local and saver_def is None]
  added, variable_defs, default_saver_def = _variable_and_saver_nodes(
      variables, saved, _saver_scope({node.name for node in graph_def.node}))
  saver_def = saver_def or default_saver_def
  taken = sorted({node.name for node in graph_def.node} &
                 {node.name for node in added})
  if taken:
    raise ValueError(f'the graph has ops named as TF1 named its variables\' and '
                     f'Saver\'s: {taken[:3]}')
  graph_def.node.extend(added)
  with tf.Graph().as_default():  # TF's export works in graph mode only
    meta = tf.compat.v1.train.export_meta_graph(
        graph_def=graph_def, saver_def=saver_def, collection_list=[])
  by_variable = {id(variable): variable_defs[name]
                 for name, variable in variables.items()}
  for key in graph.get_all_collection_keys():
    _add_collection(meta, key, graph.get_collection(key), by_variable)
  return meta


def serialized_tf1_meta_graph_def(graph, saver_def=None):
  """`tf1_meta_graph_def(graph, saver_def)` serialized, made once per version
  of `graph`: a checkpoint's `.meta` and the `meta_graph_def` event of
  TensorBoard's event files (TF1's CheckpointSaverHook and FileWriter wrote
  both) share it.

  Raises:
    Exception: what made the graph's export fail, at every call for its version.
  """
  key = (graph.version, saver_def and saver_def.SerializeToString())
  cached = getattr(graph, '_tfmon_meta_graph', None)
  if cached is None or cached[0] != key:
    try:
      cached = (key, tf1_meta_graph_def(graph, saver_def).SerializeToString(), None)
    except Exception as e:  # pylint: disable=broad-except
      cached = (key, None, e)
    graph._tfmon_meta_graph = cached  # pylint: disable=protected-access
  if cached[2] is not None:
    raise cached[2]
  return cached[1]


def serialized_or_none(graph):
  """`serialized_tf1_meta_graph_def(graph)`, or None for a graph it cannot be
  made of (an event file is written without, as a checkpoint warns)."""
  try:
    return serialized_tf1_meta_graph_def(graph)
  except Exception:  # pylint: disable=broad-except
    return None


def _saver_scope(names):
  """'save', or 'save_1', ... when a Saver the graph code built (a Scaffold's
  `saver=`) holds it, as TF1 named a second Saver's ops."""
  scope, number = 'save', 0
  while any(name == scope or name.startswith(scope + '/') for name in names):
    number += 1
    scope = f'save_{number}'
  return scope


def _as_variable_handles(graph, graph_def):
  """Makes each captured variable's placeholder in `graph_def` a VarHandleOp of
  its name; returns `{op name: variable}`."""
  variables = {}
  for variable in graph.global_variables() + graph.get_collection(
      tf.compat.v1.GraphKeys.LOCAL_VARIABLES):
    handle = getattr(variable, '_tfmon_graph_handle', None)
    if handle is not None:
      variables[handle.op.name] = variable
  for node in graph_def.node:
    variable = variables.get(node.name)
    if variable is None or node.op != 'Placeholder':
      continue
    name, output_shapes = node.name, None
    if '_output_shapes' in node.attr:
      output_shapes = attr_value_pb2.AttrValue()
      output_shapes.CopyFrom(node.attr['_output_shapes'])
    node.Clear()
    node.name, node.op = name, 'VarHandleOp'
    if output_shapes is not None:
      node.attr['_output_shapes'].CopyFrom(output_shapes)
    node.attr['dtype'].type = variable.dtype.as_datatype_enum
    node.attr['shape'].shape.CopyFrom(variable.shape.as_proto())
    node.attr['shared_name'].s = node.name.encode()
    node.attr['container'].s = b''
  return variables


def _variable_and_saver_nodes(variables, saved, scope):
  """The nodes TF1 added for `variables` (`{op name: variable}`) and for a
  Saver of those named in `saved`, in name scope `scope`: `(nodes, {op name:
  serialized VariableDef}, SaverDef)`."""
  nodes, variable_defs = [], {}
  keys, slices, reads, dtypes = [], [], [], []
  for name, variable in variables.items():
    dtype = variable.dtype.as_datatype_enum
    zeros = f'{name}/Initializer/zeros'
    nodes += [
        _node(zeros, 'Const', dtype=_type(dtype), value=_attr(tensor=tf.make_tensor_proto(
            0, variable.dtype, variable.shape.as_list()))),
        _node(f'{name}/Assign', 'AssignVariableOp', [name, zeros], dtype=_type(dtype)),
        _node(f'{name}/Read/ReadVariableOp', 'ReadVariableOp', [name], dtype=_type(dtype))]
    variable_def = variable_pb2.VariableDef(
        variable_name=f'{name}:0', initializer_name=f'{name}/Assign',
        snapshot_name=f'{name}/Read/ReadVariableOp:0', initial_value_name=f'{zeros}:0',
        trainable=variable.trainable, is_resource=True)
    part = tf_internals.save_slice_info(variable)
    if part is not None:
      variable_def.save_slice_info_def.CopyFrom(part.to_proto())
    variable_defs[name] = variable_def.SerializeToString()
    if name not in saved:
      continue
    keys.append(name if part is None else part.full_name)
    slices.append('' if part is None else part.spec)
    reads.append(f'{name}/Read/ReadVariableOp')
    dtypes.append(dtype)
  if not saved:
    return nodes, variable_defs, None  # TF1's Saver refused to save nothing
  strings = _type(tf.string.as_datatype_enum)
  def constant(node_name, values):
    return _node(node_name, 'Const', dtype=strings, value=_attr(
        tensor=tf.make_tensor_proto(values, tf.string, [len(values)])))
  scalar_string = {'dtype': strings, 'shape': _attr(shape=tf.TensorShape([]).as_proto())}
  dtype_list = _attr(list=attr_value_pb2.AttrValue.ListValue(type=dtypes))
  nodes += [
      _node(f'{scope}/filename/input', 'Const', dtype=strings,
            value=_attr(tensor=tf.make_tensor_proto('model'))),
      _node(f'{scope}/filename', 'PlaceholderWithDefault',
            [f'{scope}/filename/input'], **scalar_string),
      _node(f'{scope}/Const', 'PlaceholderWithDefault', [f'{scope}/filename'],
            **scalar_string),
      constant(f'{scope}/SaveV2/tensor_names', keys),
      constant(f'{scope}/SaveV2/shape_and_slices', slices),
      _node(f'{scope}/SaveV2', 'SaveV2',
            [f'{scope}/Const', f'{scope}/SaveV2/tensor_names',
             f'{scope}/SaveV2/shape_and_slices'] + reads,
            dtypes=dtype_list),
      _node(f'{scope}/control_dependency', 'Identity',
            [f'{scope}/Const', f'^{scope}/SaveV2'], T=strings),
      constant(f'{scope}/RestoreV2/tensor_names', keys),
      constant(f'{scope}/RestoreV2/shape_and_slices', slices),
      _node(f'{scope}/RestoreV2', 'RestoreV2',
            [f'{scope}/Const', f'{scope}/RestoreV2/tensor_names',
             f'{scope}/RestoreV2/shape_and_slices'],
            dtypes=dtype_list)]
  assigns = []
  for i, (name, dtype) in enumerate(zip(saved, dtypes)):
    suffix = f'_{i}' if i else ''
    nodes += [
        _node(f'{scope}/Identity{suffix}', 'Identity',
              [f'{scope}/RestoreV2:{i}' if i else f'{scope}/RestoreV2'], T=_type(dtype)),
        _node(f'{scope}/AssignVariableOp{suffix}', 'AssignVariableOp',
              [name, f'{scope}/Identity{suffix}'], dtype=_type(dtype))]
    assigns.append(f'^{scope}/AssignVariableOp{suffix}')
  nodes.append(_node(f'{scope}/restore_all', 'NoOp', assigns))
  saver_def = saver_pb2.SaverDef(
      filename_tensor_name=f'{scope}/Const:0',
      save_tensor_name=f'{scope}/control_dependency:0',
      restore_op_name=f'{scope}/restore_all', max_to_keep=5,
      keep_checkpoint_every_n_hours=10000, version=saver_pb2.SaverDef.V2)
  return nodes, variable_defs, saver_def


def _node(name, op, inputs=(), **attrs):
  node = node_def_pb2.NodeDef(name=name, op=op, input=list(inputs))
  for key, value in attrs.items():
    node.attr[key].CopyFrom(value)
  return node


def _attr(**kwargs):
  return attr_value_pb2.AttrValue(**kwargs)


def _type(dtype_enum):
  return attr_value_pb2.AttrValue(type=dtype_enum)


def _add_collection(meta, key, items, by_variable):
  """Writes a collection into `meta` as TF1's export did (`by_variable`: id of a
  variable -> its serialized VariableDef), what of it TF1's
  proto kinds hold: variables, tensors and ops by name, queue runners,
  numbers and strings. Others (hooks' own objects) are left out, as TF1 did."""
  if not isinstance(key, str):
    return
  collection = meta_graph_pb2.CollectionDef()
  for item in items:
    if isinstance(item, tf.Variable):
      variable_def = by_variable.get(id(item))
      if variable_def is not None:
        collection.bytes_list.value.append(variable_def)
    elif isinstance(item, (tf.Tensor, tf.Operation)):
      collection.node_list.value.append(item.name)
    elif isinstance(item, tf.compat.v1.train.QueueRunner):
      collection.bytes_list.value.append(item.to_proto().SerializeToString())
    elif isinstance(item, (str, bytes)):
      collection.bytes_list.value.append(
          item.encode() if isinstance(item, str) else item)
    elif isinstance(item, bool) or not isinstance(item, (int, float)):
      continue
    elif isinstance(item, int):
      collection.int64_list.value.append(item)
    else:
      collection.float_list.value.append(item)
  kinds = [kind for kind in ('bytes_list', 'node_list', 'int64_list', 'float_list')
           if getattr(collection, kind).value]
  if len(kinds) == 1 and (key not in _VARIABLE_COLLECTIONS or kinds == ['bytes_list']):
    meta.collection_def[key].CopyFrom(collection)
