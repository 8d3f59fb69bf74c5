"""What TF 2.15 recorded in data/: each `make_tf215_*.py` script (run under TF
2.15 with tensorflow-estimator 2.15 to record; its helpers are the tests'
reference inputs and model_fns) and the JSON it wrote."""

import functools
import importlib.util
import json
import os

DATA = os.path.join(os.path.dirname(__file__), 'data')


@functools.cache
def script(name):
  """data/make_tf215_<name>.py, imported once."""
  module = f'make_tf215_{name}'
  spec = importlib.util.spec_from_file_location(module, os.path.join(DATA, f'{module}.py'))
  loaded = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(loaded)
  return loaded


@functools.cache
def values(name):
  """data/tf215_<name>.json, read once."""
  with open(os.path.join(DATA, f'tf215_{name}.json')) as f:
    return json.load(f)
