"""tfmon.estimator: the tf.estimator names a TF1 Estimator program uses, for TF 2.16+.

`model_fn`s run on tfmon's TF1 graph capture (`tfmon.Graph`); see estimator.py.
"""

from tfmon.estimator import experimental
from tfmon.estimator import inputs
from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import EstimatorSpec, ModeKeys, RunConfig
from tfmon.estimator.training import EvalSpec, TrainSpec, train_and_evaluate

__all__ = ['Estimator', 'EstimatorSpec', 'EvalSpec', 'ModeKeys', 'RunConfig',
           'TrainSpec', 'experimental', 'inputs', 'train_and_evaluate']
