"""What TensorFlow runs for a call, as its optimizer left it."""

from tensorflow.python.eager import context  # the only way to see a function's kernels


def kernels_run(run):
  """The op types of the functions `run()` instantiates, after TF's optimizations.

  Functions are optimized once, when first called: `run` must make them.
  """
  ctx = context.context()
  ctx.enable_run_metadata()
  try:
    ctx.export_run_metadata()  # drops what was collected before, by anyone
    run()
    metadata = ctx.export_run_metadata()
  finally:
    ctx.disable_run_metadata()
  return [node.op for function in metadata.function_graphs
          for partition in function.partition_graphs for node in partition.node]
