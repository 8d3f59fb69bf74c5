"""The compiling layer: fetches and feeds in, one tf.function call, numpy out."""

from tfmon.compiled.call_compiler import CallCompiler
from tfmon.compiled.compiled_call import CompiledCall
from tfmon.compiled.fetch_plan import FetchPlan, op
