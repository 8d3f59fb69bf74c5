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
