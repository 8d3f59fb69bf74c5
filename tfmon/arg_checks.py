"""Checks of numeric constructor arguments, failing early with the value and the fix."""

import numbers


def check_count(value, name, allow_none=True, allow_zero=False, zero_means='off'):
  """Raises unless `value` is an int step count (None and 0 where allowed).

  Raises:
    TypeError: naming `name` and the value, if it is not an int (or None).
    ValueError: naming them, if it is negative (or zero where not allowed).
  """
  if value is None and allow_none:
    return
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise TypeError(f'{name}={value!r} of type {type(value).__name__} is not a '
                    f'number of steps: pass a positive int'
                    f'{" or None" if allow_none else ""}.')
  if value < 0 or (value == 0 and not allow_zero):
    raise ValueError(f'{name}={value!r} must be a positive int'
                     f'{f" (0 or None turns it {zero_means})" if allow_zero else ""}.')


def check_seconds(value, name, allow_none=True, allow_zero=False, zero_means='off'):
  """Raises unless `value` is a number of seconds (None and 0 where allowed)."""
  if value is None and allow_none:
    return
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise TypeError(f'{name}={value!r} of type {type(value).__name__} is not a '
                    'number of seconds: pass a positive number'
                    f'{" or None" if allow_none else ""}.')
  if value < 0 or (value == 0 and not allow_zero):
    raise ValueError(f'{name}={value!r} must be a positive number of seconds'
                     f'{f" (0 or None turns it {zero_means})" if allow_zero else ""}.')


def check_bool(value, name):
  if not isinstance(value, bool):
    raise TypeError(f'{name}={value!r} of type {type(value).__name__} must be True '
                    'or False.')


def check_list_of(value, cls, arg_name, noun):
  """Returns `value` (None, or an iterable of `cls` instances) as a list.

  `cls` is one of tf.compat.v1.train's classes, which tfmon.train shares.

  Raises:
    TypeError: naming the item that is not a `cls`, or a single `noun` given
      where a list is due.
  """
  if value is None:
    return []
  kind = cls.__name__
  if isinstance(value, cls):
    raise TypeError(f'{arg_name} must be a list of {kind}; got the single {noun} '
                    f'{value!r}. Pass {arg_name}=[{noun}].')
  try:
    items = list(value)
  except TypeError:
    raise TypeError(f'{arg_name}={value!r} must be a list of {kind}; got {value!r} '
                    f'of type {type(value).__name__}.') from None
  for i, item in enumerate(items):
    if not isinstance(item, cls):
      raise TypeError(
          f'{arg_name}[{i}] is {item!r} of type {type(item).__name__}, not a {kind} '
          f'(tfmon.train.{kind}, the same class as tf.compat.v1.train.{kind}).')
  return items
