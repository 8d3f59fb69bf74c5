"""tfmon.compat.v1: `tf.compat.v1` names tfmon ports (`estimator`)."""

from tfmon.compat.v1 import estimator
