"""Graceful stop on SIGTERM and SIGINT: finish the step, save, run `end`, exit.

What a session promises when one of its stop signals arrives (SIGTERM from a
preempting scheduler or Kubernetes, SIGINT from Ctrl-C):
- the step in flight finishes; no later step starts: `should_stop()` turns
  true, and a `run` called anyway closes the session instead of running;
- closing runs every hook's `end` (CheckpointSaverHook saves the last step, and
  its listeners' `end` runs), then raises `SystemExit(128 + signal)`: 143 for
  SIGTERM, 130 for SIGINT, the code a shell reports for a process the signal
  stopped, so a supervisor restarts the job rather than marking it done;
- a second signal while stopping is logged and ignored, so the checkpoint being
  saved is whole; a third restores the previous handler and delivers the signal
  to it (the escape from a stuck step). Even a stop in the middle of a save
  keeps the newest complete checkpoint newest: TensorFlow moves the `checkpoint`
  state file to a new checkpoint only once it is written.

Python runs signal handlers in the main thread between bytecodes, so a handler
runs at the latest when the TensorFlow call in progress returns: that is the
step boundary of an unfused run. A fused run (`steps_per_loop` > 1) is one long
call, so its session also sets a wakeup fd (`signal.set_wakeup_fd`), written by
the C-level handler from whatever thread receives the signal; a watcher thread
reading it calls `RawSession.request_stop_at_step_boundary()` while the loop
still runs (TensorFlow releases the GIL during a call), and the loop ends after
its current step. Handlers can only be installed from the main thread: a session
created in another thread logs how to stop it (`request_graceful_stop`).
"""

import os
import signal
import threading
import weakref

from tfmon import tf_logging as logging

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# Signals no process can handle.
_UNCATCHABLE = tuple(getattr(signal, name) for name in ('SIGKILL', 'SIGSTOP')
                     if hasattr(signal, name))


def check_signals(value, arg_name='graceful_stop_signals'):
  """Returns `value` as a tuple of `signal.Signals` (empty for None or ()).

  Raises:
    TypeError: naming `value` if it is not a list or tuple of signals.
    ValueError: naming a number that is no signal, or SIGKILL or SIGSTOP.
  """
  if value is None:
    return ()
  if isinstance(value, (int, str)) or not isinstance(value, (list, tuple, set,
                                                             frozenset)):
    raise TypeError(
        f'{arg_name}={value!r} of type {type(value).__name__} is not a list of '
        'signals: pass e.g. (signal.SIGTERM, signal.SIGINT), or None (or ()) to '
        'leave signal handling to your program.')
  signals = []
  for item in value:
    if isinstance(item, bool) or not isinstance(item, int):
      raise TypeError(
          f'{arg_name} holds {item!r} of type {type(item).__name__}, not a signal: '
          'use the signal module\'s constants, e.g. signal.SIGTERM.')
    try:
      item = signal.Signals(item)
    except ValueError:
      raise ValueError(f'{arg_name} holds {item!r}, which is not a signal number '
                       'on this system: use the signal module\'s constants.') from None
    if item in _UNCATCHABLE:
      raise ValueError(f'{arg_name} holds {item.name}, which no process can handle: '
                       'leave it out (SIGTERM and SIGINT are the usual ones).')
    signals.append(item)
  return tuple(dict.fromkeys(signals))


def exit_code(signum):
  """The exit code a shell reports for a process stopped by `signum`."""
  return 128 + int(signum)


_thread_warning_logged = False


class GracefulStop:
  """A session's stop signals: handlers, the signal received, and the watcher.

  Args:
    signals: The `signal.Signals` to handle (from `check_signals`).
    session: The session; held weakly, so that a session dropped without
      `close()` does not swallow the signals of the rest of the program.
    request_stop_at_step_boundary: Called with the session, from the watcher
      thread, when a signal arrives during a run: ends a fused run after its
      current step.
  """

  def __init__(self, signals, session, request_stop_at_step_boundary):
    self.signals = signals
    self.signal = None  # the first stop signal received, or None
    self._received = 0
    self._session = weakref.ref(session)
    self._request_stop = request_stop_at_step_boundary
    self._previous = {}  # signal -> the handler it had before install()
    self._previous_wakeup_fd = None
    self._pipe = None
    self._watcher = None
    self._released = False  # closed in a thread that cannot restore the handlers

  @property
  def installed(self):
    return bool(self._previous)

  def install(self, watch_during_runs):
    """Installs the handlers (main thread only; elsewhere, logs how to stop).

    Args:
      watch_during_runs: Also watch for signals while a run is in progress, to
        end a fused run at its next step boundary.
    """
    if not self.signals:
      return
    if threading.current_thread() is not threading.main_thread():
      global _thread_warning_logged
      if not _thread_warning_logged:
        _thread_warning_logged = True
        logging.warning(
            'This session was created in thread %r, and Python installs signal '
            'handlers only in the main thread: %s will not stop it gracefully. '
            'To stop it at a step boundary with a checkpoint, install a handler '
            'in the main thread that calls session.request_graceful_stop(signum), '
            'e.g. signal.signal(signal.SIGTERM, lambda signum, frame: '
            'session.request_graceful_stop(signum)); or create the session in the '
            'main thread. Pass graceful_stop_signals=None to silence this.',
            threading.current_thread().name,
            ' and '.join(s.name for s in self.signals))
      return
    try:
      for signum in self.signals:
        self._previous[signum] = signal.signal(signum, self._handle)
      if watch_during_runs:
        self._start_watcher()
    except BaseException:
      self.restore()
      raise

  def restore(self):
    """Restores the handlers (and wakeup fd) found at install().

    Only the main thread can: a session closed in another thread leaves its
    handlers in place, released, and the first signal that reaches them
    restores them and hands itself on, as for a session dropped unclosed.
    """
    if not self.installed:
      return
    if threading.current_thread() is not threading.main_thread():
      self._released = True
      return
    if self._pipe is not None:
      signal.set_wakeup_fd(self._previous_wakeup_fd)
      read_fd, write_fd = self._pipe
      os.write(write_fd, b'\0')  # wakes the watcher: 0 is no signal
      self._watcher.join()
      os.close(read_fd)
      os.close(write_fd)
      self._pipe = self._watcher = None
    previous, self._previous = self._previous, {}
    for signum, handler in previous.items():
      signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

  def request(self, signum, from_handler=False):
    """Records that `signum` asks the session to stop at the next step boundary."""
    signum = signal.Signals(signum)
    self._received += 1
    if self.signal is None:
      self.signal = signum
      logging.warning(
          'Received %s: stopping after the step in flight. The hooks\' end runs '
          'next (CheckpointSaverHook saves a checkpoint at that step), then the '
          'process exits with code %d. A second %s is ignored while stopping; a '
          'third stops at once (the newest complete checkpoint stays the one a '
          'restart restores).', signum.name, exit_code(signum), signum.name)
    elif from_handler and self._received >= 3 and signum in self._previous:
      logging.warning('Received %s a third time: handing it to the previous '
                      'handler.', signum.name)
      handler = self._previous[signum]
      self.restore()
      if callable(handler):
        handler(signum, None)
      else:
        signal.raise_signal(signum)  # its default action, or ignored
    else:
      logging.warning('Received %s again: ignored while the session stops after '
                      '%s (send it once more to stop at once).', signum.name,
                      self.signal.name)

  def _handle(self, signum, frame):
    del frame
    if self._released or self._session() is None:  # closed elsewhere, or dropped
      handler = self._previous.get(signum)
      self.restore()
      if callable(handler):
        handler(signum, None)
      else:
        signal.raise_signal(signum)
      return
    self.request(signum, from_handler=True)

  def _start_watcher(self):
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # set_wakeup_fd requires it
    self._pipe = (read_fd, write_fd)
    self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd)
    self._watcher = threading.Thread(
        target=self._watch, args=(read_fd, self._previous_wakeup_fd),
        name='tfmon-graceful-stop', daemon=True)
    self._watcher.start()

  def _watch(self, read_fd, forward_fd):
    """Runs in the watcher thread until restore() writes a 0."""
    while True:
      data = os.read(read_fd, 64)
      if forward_fd not in (None, -1):
        try:  # whoever set a wakeup fd before us (an asyncio loop) still gets it
          os.write(forward_fd, data.replace(b'\0', b''))
        except OSError:
          pass
      if not data or b'\0' in data:
        return
      if any(byte in self.signals for byte in data) and not self._released:
        session = self._session()
        if session is not None:
          try:
            self._request_stop(session)
          except Exception as e:  # pylint: disable=broad-except
            # The main thread's handler still stops the session at the next run.
            logging.debug('Could not end the fused run early: %s', e)
