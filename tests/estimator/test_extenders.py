"""add_metrics: the same model, evaluated with more metrics."""

import pytest
import tensorflow as tf

from tfmon import estimator
from tests.estimator.test_experimental import _eval_input, _input, model_fn


def test_add_metrics_evaluates_the_models_metrics_and_the_new_ones(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path))
  model.train(_input, max_steps=3)

  def metric_fn(labels, predictions, features):
    return {'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions),
            'x': tf.compat.v1.metrics.mean(features)}

  extended = estimator.add_metrics(model, metric_fn)
  assert extended.model_dir == model.model_dir
  before, after = model.evaluate(_eval_input), extended.evaluate(_eval_input)
  assert set(after) == set(before) | {'mae', 'x'}
  assert after['w'] == before['w'] and after['x'] == 2.5
  assert after['mae'] == pytest.approx(2.5 * (2 - before['w']))


def test_add_metrics_refuses_a_metric_fn_of_other_arguments(tmp_path):
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r"not expected args: \['logits'\]"):
    estimator.add_metrics(model, lambda logits: {})
