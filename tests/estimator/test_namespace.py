"""tfmon.estimator against TF 2.15's tf.estimator namespace, recorded in
data/tf215_estimator_names.json (made by data/make_tf215_estimator_names.py):
every name exists with TF's parameters, or is refused naming the fix."""

import importlib
import inspect

import pytest

import tfmon
from tests.estimator import recorded
from tfmon import estimator

_TF215 = recorded.values('estimator_names')['names']

# Where each TF module's names are, most specific first.
_MODULES = (('tf.compat.v1.estimator.tpu', 'tfmon.estimator.tpu'),
            ('tf.compat.v1.estimator', 'tfmon.compat.v1.estimator'),
            ('tf.estimator', 'tfmon.estimator'))

# Refused on access, each naming what to use instead.
REFUSED = {'LinearSDCA': 'Ftrl', 'RNNClassifier': 'model_fn', 'RNNEstimator': 'model_fn',
           'KMeans': 'scikit-learn', 'EmbeddingConfigSpec': 'embedding columns'}

# Exist with TF's signature, and refuse when called, naming the fix.
REFUSED_WHEN_CALLED = {'build_raw_supervised_input_receiver_fn': 'PREDICT graph'}


def _tfmon_path(tf_name):
  for tf_module, tfmon_module in _MODULES:
    if tf_name.startswith(tf_module + '.'):
      return tfmon_module, tf_name[len(tf_module) + 1:]
  raise AssertionError(tf_name)


def _resolve(tf_name):
  """tfmon's object for `tf_name`; AttributeError if there is none."""
  module, attribute = _tfmon_path(tf_name)
  value = importlib.import_module(module)
  for part in attribute.split('.'):
    value = getattr(value, part)
  return value


def _accepts(tf_parameters, value, label):
  """Asserts `value`'s signature takes each of TF's named parameters."""
  names = [p for p in tf_parameters if not p.startswith('*')]
  if not names:
    return
  ours = inspect.signature(value).parameters
  missing = [n for n in names if n not in ours or ours[n].kind in (
      inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
  assert not missing, f'{label}{inspect.signature(value)} lacks TF 2.15\'s {missing}'
  if any(p.startswith('**') for p in tf_parameters):
    assert any(p.kind == inspect.Parameter.VAR_KEYWORD for p in ours.values()), label


def test_the_recorded_list_is_tf_215s_whole_namespace():
  assert len(_TF215) == 164
  assert {'tf.estimator.Estimator', 'tf.estimator.experimental.InMemoryEvaluatorHook',
          'tf.compat.v1.estimator.tpu.TPUEstimator',
          'tf.compat.v1.estimator.inputs.numpy_input_fn'} <= set(_TF215)


@pytest.mark.parametrize('tf_name', sorted(_TF215))
def test_every_tf215_name_exists_with_tfs_parameters_or_is_refused(tf_name):
  entry = _TF215[tf_name]
  short = tf_name.rsplit('.', 1)[1]
  if short in REFUSED:
    with pytest.raises(AttributeError) as refused:  # on access, naming the fix
      _resolve(tf_name)
    assert REFUSED[short] in str(refused.value), str(refused.value)
    assert f'has no {short}:' in str(refused.value), str(refused.value)
    return
  value = _resolve(tf_name)
  if entry['kind'] == 'module':
    assert inspect.ismodule(value), tf_name
    return
  assert inspect.isclass(value) if entry['kind'] == 'class' else callable(value), tf_name
  if entry['parameters'] is not None:
    _accepts(entry['parameters'], value, tf_name)


_MEMBERS = sorted((name, member) for name, entry in _TF215.items()
                  for member in entry.get('members', {}))


@pytest.mark.parametrize('tf_name, member', _MEMBERS)
def test_every_member_of_tfs_classes_exists_with_tfs_parameters(tf_name, member):
  if tf_name.rsplit('.', 1)[1] in REFUSED:
    return  # refused: the test above
  cls = _resolve(tf_name)
  recorded = _TF215[tf_name]['members'][member]
  assert hasattr(cls, member), f'{tf_name}.{member}'
  if isinstance(recorded, dict):
    assert getattr(cls, member) == recorded['constant'], f'{tf_name}.{member}'
  elif recorded is not None:  # a method (None: a property, or TF 2's hidden
    # export_savedmodel, which tfmon's one Estimator keeps as v1's method)
    assert callable(getattr(cls, member)), f'{tf_name}.{member}'
    _accepts(recorded, getattr(cls, member), f'{tf_name}.{member}')


@pytest.mark.parametrize('name', sorted(REFUSED_WHEN_CALLED))
def test_names_refused_when_called_name_the_fix(name):
  with pytest.raises(NotImplementedError, match=REFUSED_WHEN_CALLED[name]):
    getattr(estimator.experimental, name)({}, {})


def test_the_hook_names_are_tfmon_trains():
  for name in ('SessionRunHook', 'SessionRunArgs', 'LoggingTensorHook',
               'CheckpointSaverHook', 'StopAtStepHook', 'SecondOrStepTimer',
               'NanLossDuringTrainingError'):
    assert getattr(estimator, name) is getattr(tfmon.train, name)
    assert getattr(tfmon.compat.v1.estimator, name) is getattr(tfmon.train, name)


def test_v1_modules_import_under_their_tf_paths():
  import tfmon.compat.v1.estimator.tpu as tpu  # pylint: disable=import-outside-toplevel
  from tfmon.compat.v1.estimator import inputs  # pylint: disable=import-outside-toplevel
  assert tpu is estimator.tpu and inputs is estimator.inputs
  assert tfmon.compat.v1.estimator.Estimator is estimator.Estimator
