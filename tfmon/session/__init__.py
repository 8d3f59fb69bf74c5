"""The session layers: raw (compiled calls), hooked, coordinated, recoverable."""

from tfmon.session.monitored_session import MonitoredSession, SingularMonitoredSession
from tfmon.session.graph_session import Session, let_tf_sessions_run_captured_graphs
from tfmon.session.raw_session import RawSession
from tfmon.session.scaffold import Scaffold
from tfmon.session.session_creator import (ChiefSessionCreator, SessionCreator,
                                           WorkerSessionCreator)
from tfmon.session.step_context import StepContext
from tfmon.session.training_session import MonitoredTrainingSession

# tf.compat.v1.Session(...) on a tfmon.Graph makes a tfmon Session (graph_session).
let_tf_sessions_run_captured_graphs()
