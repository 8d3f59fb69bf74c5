"""tfmon.train: the tf.compat.v1.train hook API for eager TensorFlow 2.

No logic here, but one process-wide choice: see `gc.freeze()` at the end.
"""

import gc

import tensorflow as tf

from tfmon.compiled.fetch_plan import op
from tfmon.compiled.graph_capture import Graph
from tfmon.compiled.graph_replicas import capture_graph
from tfmon.hook_api import (SessionRunArgs, SessionRunContext, SessionRunHook,
                            SessionRunValues)
from tfmon.hooks import (CheckpointSaverHook, CheckpointSaverListener,
                         EvaluationHook, FeedFnHook, FinalOpsHook,
                         GlobalStepWaiterHook, KerasCallbackHook,
                         LoggingTensorHook, NanLossDuringTrainingError,
                         NanTensorHook, ProfilerHook, StepCounterHook,
                         StopAtStepHook, SummarySaverHook,
                         make_early_stopping_hook, read_eval_metrics,
                         stop_if_higher_hook, stop_if_lower_hook,
                         stop_if_no_decrease_hook, stop_if_no_increase_hook)
from tfmon.session import (ChiefSessionCreator, MonitoredSession,
                           MonitoredTrainingSession, Scaffold, Session,
                           SessionCreator, SingularMonitoredSession,
                           WorkerSessionCreator)
from tfmon.training_util import (create_global_step, get_global_step,
                                 get_or_create_global_step, global_step,
                                 global_step_after_run)

# TensorFlow's own timer, shared by every periodic hook.
SecondOrStepTimer = tf.compat.v1.train.SecondOrStepTimer

__all__ = [
    'CheckpointSaverHook', 'CheckpointSaverListener', 'ChiefSessionCreator',
    'EvaluationHook', 'FeedFnHook', 'FinalOpsHook', 'GlobalStepWaiterHook', 'Graph',
    'KerasCallbackHook', 'LoggingTensorHook', 'MonitoredSession',
    'MonitoredTrainingSession', 'NanLossDuringTrainingError', 'NanTensorHook', 'ProfilerHook', 'Scaffold',
    'SecondOrStepTimer', 'Session', 'SessionCreator', 'SessionRunArgs', 'SessionRunContext',
    'SessionRunHook', 'SessionRunValues', 'SingularMonitoredSession',
    'StepCounterHook', 'StopAtStepHook', 'SummarySaverHook', 'WorkerSessionCreator',
    'capture_graph', 'create_global_step', 'get_global_step', 'get_or_create_global_step',
    'global_step', 'global_step_after_run', 'make_early_stopping_hook', 'op',
    'read_eval_metrics', 'stop_if_higher_hook', 'stop_if_lower_hook',
    'stop_if_no_decrease_hook', 'stop_if_no_increase_hook',
]

# What is imported by now (TensorFlow, numpy and tfmon: ~330,000 objects) lives
# as long as the process. Frozen, it is no longer walked by every full garbage
# collection: the first one after the imports otherwise costs 0.15-0.18 s of a
# job's start (BUILD_NOTES.md, "Startup: gc.freeze()"). Objects made later are
# collected as before; `gc.unfreeze()` undoes it.
gc.freeze()
