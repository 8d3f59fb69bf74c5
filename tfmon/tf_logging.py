"""tfmon's log lines, on TensorFlow's `tensorflow` logger, where v1's hooks logged.

Both habits of TF users turn them on (SPEC section 5):
`tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)` sets the
`tensorflow` logger's level, which Python's `logging` then honours; and
`absl.logging.set_verbosity('info')`, which outside `absl.app` sets only the
`absl` logger's level, so a line below the `tensorflow` logger's level is still
handed to its handlers when absl's verbosity was set to allow it. A verbosity set
on neither keeps Python's default (WARNING and above).

TensorFlow gives its logger a handler of its own when the root logger has none
at its first line ("to prevent double logging"). It prints TF1's format,
`INFO:tensorflow:<message>`, which TF1 users grep for, as does the handler
`logging.basicConfig()` adds; `absl.app.run` installs absl's format, which is
then the program's choice. A root handler added later (by `absl.app.run`, or
`logging.basicConfig`) would print every line twice: tfmon's lines then go to
the root's handlers and not to TF's own. (TF's own lines print twice then, as
they did in TF1.)

TensorFlow's checkpoint writer adds such a root handler behind the user's back:
on every save it logs `Sharding callback duration: N microseconds` with absl's
module-level `logging.info`, which calls `logging.basicConfig()` when the root
logger has none. From tfmon's first save on, TF's own lines (its hooks'
included) would print twice, and with absl's verbosity at INFO the sharding line
would print on every save; TF1 printed neither. tfmon's saves run in
`quiet_checkpoint_save`, which undoes both.

The module has the calls tfmon uses of `absl.logging` (`from tfmon import
tf_logging as logging`).
"""

import contextlib
import logging as _logging
import os
import sys

from absl import logging as _absl_logging
import tensorflow as tf

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARNING = _logging.WARNING
ERROR = _logging.ERROR

_counts = {}  # call site -> lines logged there, for log_first_n


def _absl_allows(level):
  """Whether `absl.logging.set_verbosity` asked for lines at `level`."""
  absl_level = _absl_logging.get_absl_logger().level  # NOTSET unless set
  return absl_level != _logging.NOTSET and level >= absl_level


def _caller():
  """File, line and function of the code that called this module."""
  frame = sys._getframe(0)  # pylint: disable=protected-access
  this_file = os.path.normcase(frame.f_code.co_filename)
  while frame is not None and os.path.normcase(frame.f_code.co_filename) == this_file:
    frame = frame.f_back
  if frame is None:
    return '(unknown file)', 0, '(unknown function)'
  return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name


def log(level, msg, *args):
  """Logs `msg % args` at `level` on the `tensorflow` logger (see module doc)."""
  logger = tf.get_logger()
  if not (logger.isEnabledFor(level) or
          (_absl_allows(level) and not logger.disabled)):
    return
  filename, lineno, function = _caller()
  record = logger.makeRecord(logger.name, level, filename, lineno, msg, args,
                             None, function)
  if (logger.propagate and _logging.root.handlers and
      any(_is_default_handler(h) for h in logger.handlers)):
    if logger.filter(record):
      for handler in ([h for h in logger.handlers if not _is_default_handler(h)] +
                      _logging.root.handlers):
        if record.levelno >= handler.level:
          handler.handle(record)
    return
  logger.handle(record)


def _is_default_handler(handler):
  """The stream handler `tf.get_logger()` adds to its logger when the root logger
  has none, or the one `logging.basicConfig()` adds to the root: the same."""
  return (type(handler) is _logging.StreamHandler and  # pylint: disable=unidiomatic-typecheck
          handler.formatter is not None and
          handler.formatter._fmt == _logging.BASIC_FORMAT)  # pylint: disable=protected-access


# What TensorFlow's checkpoint writer logs on every save, and TF1's did not.
_PER_SAVE_LINES = ('Sharding callback duration',)


def _not_per_save_line(record):
  return record.levelno >= WARNING or not str(record.msg).startswith(_PER_SAVE_LINES)


@contextlib.contextmanager
def quiet_checkpoint_save():
  """Runs a TensorFlow checkpoint save without the logging it adds (module doc).

  While the save runs, absl's logger drops the per-save INFO lines; after it, a
  root handler the save added (`logging.basicConfig()`'s, when the root had
  none) is removed. Nothing the user configured is changed, and TensorFlow's
  warnings during the save still print.
  """
  absl_logger = _absl_logging.get_absl_logger()
  root_handlers = list(_logging.root.handlers)
  absl_logger.addFilter(_not_per_save_line)
  try:
    yield
  finally:
    absl_logger.removeFilter(_not_per_save_line)
    for handler in list(_logging.root.handlers):
      if handler not in root_handlers and _is_default_handler(handler):
        _logging.root.removeHandler(handler)
        handler.close()


def debug(msg, *args):
  log(DEBUG, msg, *args)


def info(msg, *args):
  log(INFO, msg, *args)


def warning(msg, *args):
  log(WARNING, msg, *args)


def error(msg, *args):
  log(ERROR, msg, *args)


def log_first_n(level, msg, n, *args):
  """Logs `msg % args` the first `n` times this line of the caller runs."""
  site = _caller()[:2]
  count = _counts.get(site, 0)
  if count < n:
    _counts[site] = count + 1
    log(level, msg, *args)
