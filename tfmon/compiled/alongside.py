"""Python work run alongside a compiled call, while TensorFlow leaves Python idle.

The first call of a new function spends seconds of a big model's start in
TensorFlow's graph optimization, in C++ without the GIL (ResNet-50 on 2 cores:
~3 s). Python work queued for the next call, such as tracing another function,
runs in a thread then, for free: the same work before the call would delay it,
and during the trace before it would share the GIL with that trace.
"""

import threading


class Pending:
  """Work queued to run alongside a compiled call (CallCompiler.alongside_next_call)."""

  def __init__(self, work):
    self._work = work
    self._lock = threading.Lock()
    self._thread = None
    self._done = False
    self._value = self._error = None

  def start(self):
    """Starts the work in a thread; False if it was started or done already."""
    with self._lock:
      if self._thread is not None or self._done:
        return False
      self._thread = threading.Thread(target=self._run, daemon=True,
                                      name='tfmon-alongside-call')
      self._thread.start()
      return True

  def _run(self):
    try:
      self._value = self._work()
    except Exception as e:  # pylint: disable=broad-except
      self._error = e  # raised by result(), in the thread that asks
    self._done = True

  def wait(self):
    """Waits for the work to end; runs it here if nothing started it."""
    with self._lock:
      thread = self._thread
      if thread is None and not self._done:
        self._run()
    if thread is not None:
      thread.join()

  def result(self):
    """What the work returned; raises what it raised."""
    self.wait()
    if self._error is not None:
      raise self._error
    return self._value


def call_alongside(queued, call, *args):
  """Returns `call(*args)`, running the `queued` Pendings (emptied) meanwhile.

  Waits for those it started before returning, and raises the first one's
  exception unless the call raised its own (then theirs wait for `result()`).
  Work someone already ran through `result()` is not run, nor raised, again.
  """
  started = [work for work in queued if work.start()]
  queued.clear()
  try:
    results = call(*args)
  finally:
    for work in started:
      work.wait()
  for work in started:
    work.result()
  return results
