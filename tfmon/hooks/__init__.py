"""Built-in hooks, one family a module."""

from tfmon.hooks.checkpoint import CheckpointSaverHook, CheckpointSaverListener
from tfmon.hooks.early_stopping import (make_early_stopping_hook, stop_if_higher_hook,
                                        stop_if_lower_hook, stop_if_no_decrease_hook,
                                        stop_if_no_increase_hook)
from tfmon.hooks.evaluation import EvaluationHook, read_eval_metrics
from tfmon.hooks.feeds import FeedFnHook
from tfmon.hooks.final_ops import FinalOpsHook
from tfmon.hooks.global_step_waiter import GlobalStepWaiterHook
from tfmon.hooks.nan import NanLossDuringTrainingError, NanTensorHook
from tfmon.hooks.profiler import ProfilerHook
from tfmon.hooks.stop_at_step import StopAtStepHook
from tfmon.hooks.summary import StepCounterHook, SummarySaverHook
from tfmon.hooks.tensor_logging import LoggingTensorHook
from tfmon.hooks.keras_callbacks import KerasCallbackHook
