"""tfmon.estimator: the tf.estimator names a TF1 Estimator program uses, for TF 2.16+.

`model_fn`s run on tfmon's TF1 graph capture (`tfmon.Graph`); see estimator.py.
"""

from tfmon.estimator.estimator import Estimator
from tfmon.estimator.spec import EstimatorSpec, ModeKeys, RunConfig

__all__ = ['Estimator', 'EstimatorSpec', 'ModeKeys', 'RunConfig']
