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

Values captured from eager code other than variables (an input pipeline's
iterator, constants) stay placeholders: feed them.
"""

import tensorflow as tf
from tensorflow.core.framework import variable_pb2

from tfmon import tf_internals


def tf1_meta_graph_def(graph):
  """A MetaGraphDef of the captured `graph` as TF1's Saver wrote it."""
  variables = {id(v._tfmon_graph_handle.op): v  # pylint: disable=protected-access
               for v in _unique(graph.global_variables() + graph.get_collection(
                   tf.compat.v1.GraphKeys.LOCAL_VARIABLES))
               if hasattr(v, '_tfmon_graph_handle')}
  by_op_name = {}
  graph_def = graph.as_graph_def(add_shapes=True)
  nodes = {node.name: node for node in graph_def.node}
  for placeholder in graph.internal_captures:
    variable = variables.get(id(placeholder.op))
    if variable is None:
      continue
    node = nodes[placeholder.op.name]
    node.op = 'VarHandleOp'
    for attr in list(node.attr):
      if attr not in ('_output_shapes', '_class'):
        del node.attr[attr]
    node.attr['dtype'].type = variable.dtype.as_datatype_enum
    node.attr['shape'].shape.CopyFrom(variable.shape.as_proto())
    node.attr['shared_name'].s = node.name.encode()
    node.attr['container'].s = b''
    by_op_name[node.name] = variable

  tf1_graph = tf.Graph()
  with tf1_graph.as_default():
    tf.compat.v1.import_graph_def(graph_def, name='')
    tf1_variables = {}
    for name, variable in by_op_name.items():
      tf1_variables[name] = _tf1_variable(tf1_graph, name, variable)
    saver = tf.compat.v1.train.Saver(
        var_list=_saver_var_list(tf1_variables), sharded=False,
        max_to_keep=0, allow_empty=True)
    for key in graph.get_all_collection_keys():
      _copy_collection(graph, tf1_graph, key, tf1_variables)
    return tf.compat.v1.train.export_meta_graph(
        graph=tf1_graph, saver_def=saver.as_saver_def())


def _tf1_variable(tf1_graph, name, variable):
  """A resource variable of `tf1_graph` on its imported handle `name`."""
  handle = tf1_graph.get_tensor_by_name(name + ':0')
  with tf.compat.v1.name_scope(name + '/'):
    zeros = tf.zeros(variable.shape, variable.dtype, name='Initializer/zeros')
    assign = tf.raw_ops.AssignVariableOp(resource=handle, value=zeros, name='Assign')
    with tf.compat.v1.name_scope('Read/'):
      read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=variable.dtype,
                                       name='ReadVariableOp')
  variable_def = variable_pb2.VariableDef(
      variable_name=handle.name, initializer_name=assign.name,
      snapshot_name=read.name, initial_value_name=zeros.name,
      trainable=variable.trainable, is_resource=True)
  part = tf_internals.save_slice_info(variable)
  if part is not None:
    variable_def.save_slice_info_def.CopyFrom(part.to_proto())
  return tf.compat.v1.Variable(variable_def=variable_def)


def _saver_var_list(tf1_variables):
  """`{checkpoint key: variable or its parts}`: the keys the checkpoint has."""
  var_list = {}
  for name, variable in tf1_variables.items():
    part = tf_internals.save_slice_info(variable)
    if part is None:
      var_list[name] = variable
    else:
      var_list.setdefault(part.full_name, []).append(variable)
  return var_list


def _copy_collection(graph, tf1_graph, key, tf1_variables):
  """Adds what `graph`'s collection `key` holds to `tf1_graph`'s, by name."""
  for item in graph.get_collection(key):
    if isinstance(item, tf.Variable):
      handle = getattr(item, '_tfmon_graph_handle', None)
      item = handle is not None and tf1_variables.get(handle.op.name)
    elif isinstance(item, (tf.Tensor, tf.Operation)):
      try:
        item = tf1_graph.as_graph_element(item.name)
      except (KeyError, ValueError):
        item = None
    elif not isinstance(item, (str, bytes, int, float)):
      item = None  # queue runners, savers, hooks' objects: not TF1's proto kinds
    if item is not None and item is not False:
      tf1_graph.add_to_collection(key, item)


def _unique(items):
  return list({id(item): item for item in items}.values())
