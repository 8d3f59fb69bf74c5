"""tfmon.train: the tf.compat.v1.train hook API for eager TensorFlow 2. No logic here."""

import tensorflow as tf

from tfmon.compiled.fetch_plan import op
from tfmon.global_step import (create_global_step, get_global_step,
                               get_or_create_global_step, global_step)
from tfmon.hook_api import (SessionRunArgs, SessionRunContext, SessionRunHook,
                            SessionRunValues)
from tfmon.hooks import (CheckpointSaverHook, CheckpointSaverListener, FeedFnHook,
                         FinalOpsHook, GlobalStepWaiterHook, LoggingTensorHook,
                         NanLossDuringTrainingError, NanTensorHook, ProfilerHook,
                         StepCounterHook, StopAtStepHook, SummarySaverHook)
from tfmon.session import (ChiefSessionCreator, MonitoredSession,
                           MonitoredTrainingSession, Scaffold, SessionCreator,
                           SingularMonitoredSession, WorkerSessionCreator)

# TensorFlow's own timer, shared by every periodic hook.
SecondOrStepTimer = tf.compat.v1.train.SecondOrStepTimer

__all__ = [
    'CheckpointSaverHook', 'CheckpointSaverListener', 'ChiefSessionCreator',
    'FeedFnHook', 'FinalOpsHook', 'GlobalStepWaiterHook', 'LoggingTensorHook',
    'NanLossDuringTrainingError', 'NanTensorHook', 'ProfilerHook',
    'MonitoredSession', 'MonitoredTrainingSession', 'Scaffold', 'SecondOrStepTimer',
    'SessionCreator', 'SessionRunArgs', 'SessionRunContext', 'SessionRunHook',
    'SessionRunValues', 'SingularMonitoredSession', 'StepCounterHook',
    'StopAtStepHook', 'SummarySaverHook', 'WorkerSessionCreator',
    'create_global_step', 'get_global_step', 'get_or_create_global_step',
    'global_step', 'op',
]
