"""tfmon.estimator: TF 2.15's tf.estimator names, for TF 2.16+.

`model_fn`s run on tfmon's TF1 graph capture (`tfmon.Graph`); see estimator.py.
`tf.compat.v1.estimator` is `tfmon.compat.v1.estimator`, and its `tpu` module
`tfmon.estimator.tpu` (docs/porting.md). Names tfmon does not provide raise
AttributeError naming what to use instead.
"""

from tfmon import train as _train
from tfmon.estimator import canned as _canned
from tfmon.estimator import experimental
from tfmon.estimator import export
from tfmon.estimator import inputs
from tfmon.estimator import tpu
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.exporter import BestExporter, Exporter, FinalExporter, LatestExporter
from tfmon.estimator.extenders import add_metrics
from tfmon.estimator.parsing_utils import (classifier_parse_example_spec,
                                           regressor_parse_example_spec)
from tfmon.estimator.spec import EstimatorSpec, ModeKeys
from tfmon.estimator.run_config import RunConfig
from tfmon.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from tfmon.estimator.warm_start import VocabInfo, WarmStartSettings

# tf.estimator re-exported tf.compat.v1.train's hook API: these are tfmon.train's.
_HOOK_NAMES = ('CheckpointSaverHook', 'CheckpointSaverListener', 'FeedFnHook',
               'FinalOpsHook', 'GlobalStepWaiterHook', 'LoggingTensorHook',
               'NanLossDuringTrainingError', 'NanTensorHook', 'ProfilerHook',
               'SecondOrStepTimer', 'SessionRunArgs', 'SessionRunContext',
               'SessionRunHook', 'SessionRunValues', 'StepCounterHook',
               'StopAtStepHook', 'SummarySaverHook')
globals().update({name: getattr(_train, name) for name in _HOOK_NAMES})

# TF 2.15's premade estimators and heads (tfmon.estimator.canned).
_PREMADE = ('BaselineClassifier', 'BaselineEstimator', 'BaselineRegressor',
            'DNNClassifier', 'DNNEstimator', 'DNNRegressor',
            'DNNLinearCombinedClassifier', 'DNNLinearCombinedEstimator',
            'DNNLinearCombinedRegressor', 'LinearClassifier', 'LinearEstimator',
            'LinearRegressor', 'Head', 'BinaryClassHead', 'MultiClassHead',
            'MultiLabelHead', 'RegressionHead', 'PoissonRegressionHead',
            'LogisticRegressionHead', 'MultiHead')
globals().update({name: getattr(_canned, name) for name in _PREMADE})

__all__ = sorted(('BestExporter', 'Estimator', 'EstimatorSpec', 'EvalSpec', 'Exporter',
                  'FinalExporter', 'LatestExporter', 'ModeKeys', 'RunConfig',
                  'TrainSpec', 'VocabInfo', 'WarmStartSettings', 'add_metrics',
                  'classifier_parse_example_spec', 'experimental', 'export',
                  'inputs', 'regressor_parse_example_spec', 'tpu',
                  'train_and_evaluate') + _HOOK_NAMES + _PREMADE)

# tf.estimator names tfmon does not provide, and what to use instead.
_NOT_PROVIDED = dict(_canned.NOT_PROVIDED)
_NOT_PROVIDED.update({
    name: (f'it is tfmon.estimator.tpu.{name} (tf.compat.v1.estimator.tpu\'s), '
           'which runs with use_tpu=False on CPUs and GPUs')
    for name in ('TPUEstimator', 'TPUEstimatorSpec', 'TPUConfig')})


def __getattr__(name):
  if name in _NOT_PROVIDED:
    raise AttributeError(f'tfmon.estimator has no {name}: {_NOT_PROVIDED[name]}.')
  raise AttributeError(f"module 'tfmon.estimator' has no attribute {name!r}")
