"""Output directories, checked before anything is written into them."""

import os

# How the user spelled each directory made absolute here (relative or `~`), for
# log lines: TF1 logged paths as given (`Saving checkpoints for 2 into
# train/model.ckpt.`), and users grep for them.
_spellings = {}


def check_directory(path, arg_name):
  """Returns `path` as an absolute directory name, checked.

  Relative and `~` paths are made absolute once, here: TensorFlow's checkpoint
  state file names checkpoints relative to the directory, and a relative
  directory joined to them again named files that do not exist (SPEC section 7:
  relative, `~` and symlinked directories behave as absolute ones). `~` is
  expanded because TensorFlow would make a directory named `~`. Log lines name
  it as given (`as_given`).

  Raises:
    TypeError: if `path` is not a path.
    ValueError: naming `arg_name` and the path, if it cannot be a directory: it,
      or the nearest part of it that exists, is not a directory. TensorFlow
      would fail later, at the first write, without the path
      (`FailedPreconditionError: ... Not a directory [Op:CreateSummaryFileWriter]`).

  Paths of other file systems (`gs://...`) are returned as given.
  """
  if not path:  # None, or '' for none
    return path
  if not isinstance(path, (str, bytes, os.PathLike)):
    raise TypeError(f'{arg_name}={path!r} of type {type(path).__name__} is not a '
                    'path: give a directory name (str or pathlib.Path).')
  path = os.fspath(path)
  if isinstance(path, bytes):
    path = os.fsdecode(path)
  if '://' in path:
    return path
  given, path = path, os.path.abspath(os.path.expanduser(path))
  if given != path:
    _spellings[path] = given
  existing = path
  while not os.path.exists(existing):
    parent = os.path.dirname(existing)
    if parent == existing:
      return path
    existing = parent
  if not os.path.isdir(existing):
    where = ('is a file' if existing == path else
             f'is under {existing!r}, which is a file')
    raise ValueError(f'{arg_name}={path!r} {where}, not a directory: give a '
                     'directory (it is created if missing).')
  return path


def as_given(path):
  """`path` as the user spelled its directory, for log lines.

  Args:
    path: A path in or under a directory `check_directory` made absolute.

  Returns:
    `path` with that directory spelled as it was given (`train/model.ckpt-2`),
    while that spelling still names it from the current directory; else `path`.
  """
  if not isinstance(path, str):
    return path
  for directory in sorted(_spellings, key=len, reverse=True):  # innermost first
    given = _spellings[directory]
    if ((path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)) and
        os.path.abspath(os.path.expanduser(given)) == directory):
      rest = path[len(directory):].lstrip(os.sep)
      return os.path.join(given, rest) if rest else given
  return path
