"""The session layers: raw (compiled calls), hooked, coordinated, recoverable."""

from tfmon.session.monitored_session import MonitoredSession, SingularMonitoredSession
from tfmon.session.raw_session import RawSession
from tfmon.session.scaffold import Scaffold
from tfmon.session.session_creator import (ChiefSessionCreator, SessionCreator,
                                           WorkerSessionCreator)
from tfmon.session.step_context import StepContext
from tfmon.session.training_session import MonitoredTrainingSession
