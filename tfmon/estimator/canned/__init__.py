"""TF 2.15's premade estimators and heads (`tf.estimator.DNNClassifier`, ...),
on tfmon's Estimator: the same graphs, variable names, optimizers, metrics,
predictions and serving signatures, so a model_dir TF 2.15 wrote continues here.

One module per family: head.py and multi_head.py (heads), metrics.py (their
evaluation metrics), optimizers.py (the optimizers TF 2.15 trained them with),
dnn.py, linear.py, dnn_linear_combined.py, baseline.py; model_fn_utils.py holds
the argument checks they share; v1.py tf.compat.v1.estimator's variants.
"""

from tfmon.estimator.canned.baseline import (BaselineClassifier, BaselineEstimator,
                                             BaselineRegressor)
from tfmon.estimator.canned.dnn import DNNClassifier, DNNEstimator, DNNRegressor
from tfmon.estimator.canned.dnn_linear_combined import (DNNLinearCombinedClassifier,
                                                        DNNLinearCombinedEstimator,
                                                        DNNLinearCombinedRegressor)
from tfmon.estimator.canned.head import (BinaryClassHead, Head, LogisticRegressionHead,
                                         MetricKeys, MultiClassHead, MultiLabelHead,
                                         PoissonRegressionHead, PredictionKeys,
                                         RegressionHead)
from tfmon.estimator.canned.linear import (LinearClassifier, LinearEstimator,
                                           LinearRegressor)
from tfmon.estimator.canned.multi_head import MultiHead
from tfmon.estimator.canned import v1  # tf.compat.v1.estimator's premade estimators

__all__ = ['BaselineClassifier', 'BaselineEstimator', 'BaselineRegressor',
           'BinaryClassHead', 'DNNClassifier', 'DNNEstimator',
           'DNNLinearCombinedClassifier', 'DNNLinearCombinedEstimator',
           'DNNLinearCombinedRegressor', 'DNNRegressor', 'Head', 'LinearClassifier',
           'LinearEstimator', 'LinearRegressor', 'LogisticRegressionHead', 'MetricKeys',
           'MultiClassHead', 'MultiHead', 'MultiLabelHead', 'PoissonRegressionHead',
           'PredictionKeys', 'RegressionHead', 'v1']

# TF 2.15's premade estimators not provided, and what to use instead (the
# reasons: BUILD_NOTES.md, "Premade estimators").
_RNN = ('not provided: TF 2.15 built it from Keras 2 recurrent layers and the '
        'SequenceFeatures layer, which Keras 3 lacks; write a model_fn with '
        'tf.compat.v1.nn.dynamic_rnn on tf.compat.v1.feature_column inputs, or use a '
        'Keras model')
NOT_PROVIDED = {
    'LinearSDCA': ('not provided (SDCA is a solver of its own, with per-example state '
                   "in sharded hash tables): use optimizer='Ftrl' (the default) in "
                   'LinearClassifier or LinearRegressor'),
    'RNNClassifier': _RNN,
    'RNNEstimator': _RNN,
}
NOT_PROVIDED.update({
    name: ('not provided (boosted trees grow an ensemble resource layer by layer, a '
           'trainer of their own): use TensorFlow Decision Forests '
           '(tensorflow_decision_forests), or DNNClassifier/LinearClassifier')
    for name in ('BoostedTreesClassifier', 'BoostedTreesRegressor',
                 'BoostedTreesEstimator')})


def __getattr__(name):
  if name in NOT_PROVIDED:
    raise AttributeError(f'tfmon.estimator has no {name}: {NOT_PROVIDED[name]}.')
  raise AttributeError(f"module 'tfmon.estimator.canned' has no attribute {name!r}")
