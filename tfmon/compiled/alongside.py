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
    self._claimed = False  # started in a thread, or running in a caller's
    self._finished = threading.Event()
    self._value = self._error = None

  def _claim(self):
    with self._lock:
      claimed, self._claimed = self._claimed, True
    return not claimed

  def start(self):
    """Starts the work in a thread; False if it was started or run already."""
    if not self._claim():
      return False
    threading.Thread(target=self._run, daemon=True, name='tfmon-alongside-call').start()
    return True

  def _run(self):
    try:
      self._value = self._work()
    except Exception as e:  # pylint: disable=broad-except
      self._error = e  # raised by result(), in the thread that asks
    self._finished.set()

  def wait(self):
    """Waits for the work to end; runs it here if nothing started it.

    Work run here may make a compiled call of its own, whose queue still holds
    this Pending: claimed, it is not started again there.
    """
    if self._claim():
      self._run()
    self._finished.wait()

  def cancel(self):
    """Keeps the work from running if it has not started; else waits for it."""
    if self._claim():
      self._finished.set()
    self._finished.wait()

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
  pending = list(queued)
  queued.clear()  # before starting: work that runs a call of its own finds none
  started = [work for work in pending if work.start()]
  try:
    results = call(*args)
  finally:
    for work in started:
      work.wait()
  for work in started:
    work.result()
  return results
