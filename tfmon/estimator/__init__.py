"""tfmon.estimator: the tf.estimator names a TF1 Estimator program uses, for TF 2.16+.

`model_fn`s run on tfmon's TF1 graph capture (`tfmon.Graph`); see estimator.py.
"""

from tfmon.estimator import experimental
from tfmon.estimator import export
from tfmon.estimator import inputs
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.exporter import BestExporter, Exporter, FinalExporter, LatestExporter
from tfmon.estimator.spec import EstimatorSpec, ModeKeys, RunConfig
from tfmon.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from tfmon.estimator.warm_start import VocabInfo, WarmStartSettings

__all__ = ['BestExporter', 'Estimator', 'EstimatorSpec', 'EvalSpec', 'Exporter',
           'FinalExporter', 'LatestExporter', 'ModeKeys', 'RunConfig', 'TrainSpec',
           'VocabInfo', 'WarmStartSettings', 'experimental', 'export', 'inputs',
           'train_and_evaluate']

# tf.estimator names tfmon does not provide, and what to use instead.
_NOT_PROVIDED = {
    name: ('premade estimators are not provided: write the model as a model_fn '
           '(TensorFlow\'s Keras layers in it), or train a Keras model with fit')
    for name in ('DNNClassifier', 'DNNRegressor', 'LinearClassifier',
                 'LinearRegressor', 'DNNLinearCombinedClassifier',
                 'DNNLinearCombinedRegressor', 'BoostedTreesClassifier',
                 'BoostedTreesRegressor', 'BaselineClassifier', 'BaselineRegressor')}
_NOT_PROVIDED.update({
    name: 'TPUs are not supported: run the model_fn with Estimator on CPUs or GPUs'
    for name in ('TPUEstimator', 'TPUEstimatorSpec', 'tpu')})


def __getattr__(name):
  if name in _NOT_PROVIDED:
    raise AttributeError(f'tfmon.estimator has no {name}: {_NOT_PROVIDED[name]}.')
  raise AttributeError(f"module 'tfmon.estimator' has no attribute {name!r}")
