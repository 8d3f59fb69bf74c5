"""tfmon.train: the tf.compat.v1.train hook API for eager TensorFlow 2. No logic here."""

from tfmon.compiled.fetch_plan import op
from tfmon.global_step import (create_global_step, get_global_step,
                               get_or_create_global_step, global_step)
from tfmon.hook_api import (SessionRunArgs, SessionRunContext, SessionRunHook,
                            SessionRunValues)
from tfmon.hooks import StopAtStepHook
from tfmon.session import (ChiefSessionCreator, MonitoredSession, Scaffold,
                           SessionCreator, SingularMonitoredSession,
                           WorkerSessionCreator)

__all__ = [
    'ChiefSessionCreator', 'MonitoredSession', 'Scaffold', 'SessionCreator',
    'SessionRunArgs', 'SessionRunContext', 'SessionRunHook', 'SessionRunValues',
    'SingularMonitoredSession', 'StopAtStepHook', 'WorkerSessionCreator',
    'create_global_step', 'get_global_step', 'get_or_create_global_step',
    'global_step', 'op',
]
