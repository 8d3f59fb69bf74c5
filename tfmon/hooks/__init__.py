"""Built-in hooks, one family a module."""

from tfmon.hooks.checkpoint import CheckpointSaverHook, CheckpointSaverListener
from tfmon.hooks.stop_at_step import StopAtStepHook
from tfmon.hooks.summary import StepCounterHook, SummarySaverHook
