"""Built-in hooks, one family a module."""

from tfmon.hooks.stop_at_step import StopAtStepHook
