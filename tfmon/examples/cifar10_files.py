"""Where the official CIFAR-10 files are, and what a partial copy lacks.

Without TensorFlow or numpy, so that `cifar10.py` checks `--data_dir` with the
other flags, before TensorFlow loads: a bad directory is answered at once, not
after seconds of imports. `cifar10_input.py` reads what `find` returns.

Either official format, from https://www.cs.toronto.edu/~kriz/cifar.html:
  - binary: `cifar-10-batches-bin/data_batch_{1..5}.bin`, `test_batch.bin`;
  - python: `cifar-10-batches-py/data_batch_{1..5}`, `test_batch`, as Keras'
    dataset cache keeps it.
The files may also sit directly in the directory.
"""

import os

FILES = {
    'binary': {'train': [f'data_batch_{i}.bin' for i in range(1, 6)],
               'test': ['test_batch.bin']},
    'python': {'train': [f'data_batch_{i}' for i in range(1, 6)],
               'test': ['test_batch']},
}
EXPECTED = ('the official CIFAR-10 binary files (cifar-10-batches-bin/data_batch_1.bin '
            '... test_batch.bin) or python files (cifar-10-batches-py/data_batch_1 '
            '... test_batch)')
_FOLDERS = ('', 'cifar-10-batches-bin', 'cifar-10-batches-py')


class DataError(ValueError):
  """CIFAR-10 data that cannot be used; the message names the file or directory."""


class Found:
  """A complete set of official files.

  Attributes:
    kind: 'binary' or 'python'.
    folder: The directory holding them.
    train: The paths of the five training batches.
    test: The path of the test batch, in a list.
  """

  def __init__(self, kind, folder):
    self.kind = kind
    self.folder = folder
    self.train = [os.path.join(folder, name) for name in FILES[kind]['train']]
    self.test = [os.path.join(folder, name) for name in FILES[kind]['test']]


def find(directory):
  """The complete set of official files in `directory` or its usual subfolders.

  Args:
    directory: The directory given as --data_dir.

  Returns:
    A `Found`.

  Raises:
    DataError: `directory` is not a directory, holds no file of either format,
      or only part of a format's six files (the message names the folder and
      the files it lacks).
  """
  if not os.path.isdir(directory):
    raise DataError(f'--data_dir {directory} is not a directory. Expected it to '
                    f'hold {EXPECTED}.')
  best = None  # (files present, folder, kind, missing) of the most complete partial set
  for name in _FOLDERS:
    folder = os.path.join(directory, name) if name else directory
    for kind, files in FILES.items():
      names = files['train'] + files['test']
      missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
      if not missing:
        return Found(kind, folder)
      present = len(names) - len(missing)
      if present and (best is None or present > best[0]):
        best = (present, folder, kind, missing)
  if best is None:
    raise DataError(f'--data_dir {directory} holds no CIFAR-10 data. Expected '
                    f'{EXPECTED}.')
  _, folder, kind, missing = best
  archive = 'cifar-10-binary.tar.gz' if kind == 'binary' else 'cifar-10-python.tar.gz'
  raise DataError(
      f'--data_dir {directory} holds only part of the CIFAR-10 {kind} files: '
      f'{folder} lacks {", ".join(missing)}. Give a directory with all six '
      f'({", ".join(FILES[kind]["train"] + FILES[kind]["test"])}), e.g. {archive} '
      'from https://www.cs.toronto.edu/~kriz/cifar.html extracted whole, or leave '
      'out --data_dir to use Keras\' dataset cache or synthetic data.')


def find_in_keras_cache():
  """The complete set of official files in Keras' dataset cache, or None."""
  try:
    return find(os.path.join(os.path.expanduser('~'), '.keras', 'datasets'))
  except DataError:  # none, or a partial copy: the caller makes synthetic data
    return None
