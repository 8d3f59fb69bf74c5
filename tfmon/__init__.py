"""tfmon: TensorFlow 1's MonitoredSession and hooks for eager TensorFlow 2.

The names of `tfmon.train` (and `tfmon.train`, `tfmon.keras` themselves) are
loaded on first use, so that `import tfmon` (and `python -m tfmon.examples...`,
which imports this package first) does not load TensorFlow before a program has
checked its flags: `--help` answers in a fraction of a second.
"""

import importlib
import importlib.util

__version__ = '0.1.0'


def __getattr__(name):
  if not name.startswith('__') and importlib.util.find_spec(f'tfmon.{name}'):
    # A submodule (tfmon.train, tfmon.keras, or one that `from tfmon import
    # tf_logging` asks for while tfmon.train itself is being imported).
    return importlib.import_module(f'tfmon.{name}')
  train = importlib.import_module('tfmon.train')
  if name == '__all__':
    return list(train.__all__)
  if name in train.__all__:
    return getattr(train, name)
  raise AttributeError(f"module 'tfmon' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | {'train', 'keras'} |
                set(importlib.import_module('tfmon.train').__all__))
