"""tfmon.compat: `tf.compat` names tfmon ports (`tfmon.compat.v1.estimator`)."""

from tfmon.compat import v1
