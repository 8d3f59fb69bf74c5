"""Output directories, checked before anything is written into them."""

import os


def check_directory(path, arg_name):
  """Raises ValueError, naming `arg_name` and the path, if `path` cannot be a
  directory: it, or the nearest part of it that exists, is not a directory.

  TensorFlow would fail later, at the first write, without the path
  (`FailedPreconditionError: ... Not a directory [Op:CreateSummaryFileWriter]`).
  Paths of other file systems (`gs://...`) are left to TensorFlow.
  """
  if path is None:
    return
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f'{arg_name}={path!r} of type {type(path).__name__} is not a '
                    'path: give a directory name (str or pathlib.Path).')
  path = os.fspath(path)
  if isinstance(path, bytes):
    path = os.fsdecode(path)
  if '://' in path:
    return
  existing = os.path.abspath(path)
  while not os.path.exists(existing):
    parent = os.path.dirname(existing)
    if parent == existing:
      return
    existing = parent
  if not os.path.isdir(existing):
    where = ('is a file' if existing == os.path.abspath(path) else
             f'is under {existing!r}, which is a file')
    raise ValueError(f'{arg_name}={path!r} {where}, not a directory: give a '
                     'directory (it is created if missing).')
