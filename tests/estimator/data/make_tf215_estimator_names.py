"""Writes tf215_estimator_names.json: TF 2.15's tf.estimator namespace, for
tests/estimator/test_namespace.py (TF 2.15 is not installed where tests run).

Run with TensorFlow 2.15 and tensorflow-estimator 2.15 installed:

  python -m venv /tmp/tf215 && /tmp/tf215/bin/pip install \
      tensorflow-cpu==2.15.1 tensorflow-estimator==2.15.0
  /tmp/tf215/bin/python tests/estimator/data/make_tf215_estimator_names.py

For every public name of the modules below (and of their public submodules):
its kind, the names and kinds of its signature's parameters (a class's
constructor's; `*args`, `**kwargs` marked so), and, for classes other than tf.compat.v1.train's hooks, their public methods'
parameters and their properties.
"""

import inspect
import json
import os

import tensorflow as tf

_MODULES = ('tf.estimator', 'tf.compat.v1.estimator')


def _parameters(value):
  try:
    signature = inspect.signature(value)
  except (TypeError, ValueError):
    return None
  prefixes = {inspect.Parameter.VAR_POSITIONAL: '*',
              inspect.Parameter.VAR_KEYWORD: '**'}
  return [prefixes.get(p.kind, '') + p.name for p in signature.parameters.values()
          if p.name != 'self']


def _members(cls):
  """Public methods (their parameters), properties (None) and constants (their
  value) of an Estimator class."""
  members = {}
  for name in sorted(dir(cls)):
    if name.startswith('_'):
      continue
    value = inspect.getattr_static(cls, name)
    if isinstance(value, property):
      members[name] = None
    elif inspect.isfunction(value):
      members[name] = _parameters(value)
    elif isinstance(value, (int, str)):
      members[name] = {'constant': value}
  return members


def _entry(value):
  if inspect.ismodule(value):
    return {'kind': 'module'}
  if inspect.isclass(value):
    entry = {'kind': 'class', 'parameters': _parameters(value),
             'defined_in': value.__module__}
    if getattr(tf.compat.v1.train, value.__name__, None) is not value:
      entry['members'] = _members(value)  # not a tf.compat.v1.train hook class
    return entry
  return {'kind': 'function', 'parameters': _parameters(value)}


def _walk(module, path, names):
  for name in sorted(dir(module)):
    if name.startswith('_'):
      continue
    value = getattr(module, name)
    names[f'{path}.{name}'] = _entry(value)
    if inspect.ismodule(value):
      _walk(value, f'{path}.{name}', names)


def main():
  names = {}
  for path in _MODULES:
    module = tf
    for part in path.split('.')[1:]:
      module = getattr(module, part)
    _walk(module, path, names)
  out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'tf215_estimator_names.json')
  with open(out, 'w') as f:
    json.dump({'tensorflow': tf.__version__, 'names': names}, f, indent=1,
              sort_keys=True)
    f.write('\n')
  print(f'{len(names)} names written to {out}')


if __name__ == '__main__':
  main()
