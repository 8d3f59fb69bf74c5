"""The census wide-and-deep program (a premade DNNLinearCombinedClassifier on
feature columns) runs end to end and gives TF 2.15's numbers."""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'examples',
                       'census_premade.py')

# The same program under TF 2.15 (tensorflow-estimator 2.15), its only changes
# `estimator = canned = tf.estimator` and tf.keras.optimizers.legacy, logged:
# "Saving dict for global step 120: accuracy = 0.805, accuracy_baseline = 0.62,
# auc = 0.88634074, ..., average_loss = 0.44560105, ..."
_TF215_AT_STEP_120 = {'accuracy': 0.805, 'accuracy_baseline': 0.62, 'auc': 0.88634074,
                      'average_loss': 0.44560105, 'prediction/mean': 0.34266958}


@pytest.mark.slow
def test_census_trains_evaluates_predicts_exports_as_tf215(tmp_path):
  run = subprocess.run([sys.executable, _SCRIPT, f'--model_dir={tmp_path}'],
                       capture_output=True, text=True, timeout=300, check=True)
  results = dict(re.findall(r'^([\w/]+): ([\d.]+)$', run.stdout, re.MULTILINE))
  assert 'Results at epoch 4' in run.stdout and results['global_step'] == '120'
  for key, value in _TF215_AT_STEP_120.items():
    assert float(results[key]) == pytest.approx(value, rel=1e-5), key
  assert len(re.findall(r'Predicted [01] with probability', run.stdout)) == 5
  export_dir = re.search(r'Exported to (\S+)', run.stdout).group(1)
  loaded = tf.saved_model.load(export_dir)
  assert sorted(loaded.signatures) == ['classification', 'predict', 'regression',
                                       'serving_default']
