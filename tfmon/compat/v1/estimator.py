"""tfmon.compat.v1.estimator: TF 2.15's tf.compat.v1.estimator names.

They are tfmon.estimator's (TF's v1 Estimator, hooks, specs and exporters
were the v2 ones, its `inputs` module is `tfmon.estimator.inputs`, its `tpu`
module `tfmon.estimator.tpu`), except the premade estimators, which are the v1
ones (tfmon.estimator.canned.v1).
"""

import sys

import tfmon.estimator as _v2
from tfmon.estimator import *  # pylint: disable=wildcard-import,unused-wildcard-import
from tfmon.estimator import experimental, export, inputs, tpu
from tfmon.estimator.canned import v1 as _v1_premade

# The v1 premade estimators (their defaults: loss_reduction='weighted_sum',
# partitioners), with the v2 heads, as TF's v1 namespace had them.
_V1_PREMADE = ('BaselineClassifier', 'BaselineEstimator', 'BaselineRegressor',
               'DNNClassifier', 'DNNEstimator', 'DNNRegressor',
               'DNNLinearCombinedClassifier', 'DNNLinearCombinedEstimator',
               'DNNLinearCombinedRegressor', 'LinearClassifier', 'LinearEstimator',
               'LinearRegressor')
globals().update({name: getattr(_v1_premade, name) for name in _V1_PREMADE})

__all__ = sorted(set(_v2.__all__) | {'inputs', 'tpu'})

# `import tfmon.compat.v1.estimator.tpu` finds the modules under these names too.
for _name, _module in (('experimental', experimental), ('export', export),
                       ('inputs', inputs), ('tpu', tpu),
                       ('tpu.experimental', tpu.experimental)):
  sys.modules[f'{__name__}.{_name}'] = _module


def __getattr__(name):
  try:
    return getattr(_v2, name)  # names tfmon.estimator refuses, refused the same
  except AttributeError as e:
    raise AttributeError(str(e).replace('tfmon.estimator',
                                        'tfmon.compat.v1.estimator', 1)) from None
