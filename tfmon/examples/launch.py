r"""Starts N local worker processes of one command, as a multi-worker cluster.

What the launcher promises:
- every worker runs the same command, with `TF_CONFIG` naming the same cluster
  of N free localhost ports and its own task index:
  `{"cluster": {"worker": ["localhost:p0", ...]}, "task": {"type": "worker",
  "index": i}}`, which `tf.distribute.MultiWorkerMirroredStrategy()` reads;
- the workers' output comes out on the launcher's stdout and stderr, each line
  prefixed by `[worker i] ` (`prefix_output=False` leaves their output alone);
- SIGTERM and SIGINT sent to the launcher are forwarded to every worker, once:
  the workers run in a process group of their own, so Ctrl-C in a terminal reaches
  them through the launcher only (a tfmon session then stops all workers
  gracefully and they exit with 128 + signal); workers still running
  `grace_secs` after the first are killed (one waiting in a collective op for a
  worker that has left cannot stop), and the launcher exits with 128 + signal;
- it never hangs on a failed cluster: once a worker exits non-zero, the others
  get `grace_secs` to exit, then are killed (a worker whose peer died waits in
  a collective op forever); and on Linux no worker outlives a killed launcher;
- it returns 0 if every worker exited 0, else the exit code of the first
  worker, in worker order, that failed by itself (128 + signal for a signal
  death); workers it killed after the grace period do not hide that code.

  python -m tfmon.examples.launch --workers 2 -- python -m my.trainer --flag x
  python -m tfmon.examples.launch --workers 2 --grace_secs 60 -- ./train.sh

From Python: `sys.exit(launch(['python', '-m', 'my.trainer'], workers=2))`.
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_POLL_SECS = 0.1


def free_ports(count, host='localhost'):
  """Returns `count` distinct TCP ports that were free on `host` just now.

  All are bound at once (port 0: the system picks) and then released, so they
  differ; another process could take one before a worker binds it, which on a
  quiet machine does not happen in practice.
  """
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind((host, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def tf_configs(ports, host='localhost'):
  """The `TF_CONFIG` of each worker of a cluster on `host`'s `ports`, as dicts."""
  workers = [f'{host}:{port}' for port in ports]
  return [{'cluster': {'worker': workers}, 'task': {'type': 'worker', 'index': i}}
          for i in range(len(workers))]


def _exit_code(returncode):
  """A Popen returncode as a shell reports it: a signal death is 128 + signal."""
  return 128 - returncode if returncode < 0 else returncode


# Loaded here, not in the child between fork and exec, where only the
# simplest calls are safe.
_LIBC = ctypes.CDLL(None) if sys.platform == 'linux' else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
  """In the child, before exec (Linux): be killed when the launcher dies."""
  _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def _copy_lines(pipe, stream_name, prefix, lock):
  """Copies `pipe` to `sys.<stream_name>` line by line, each line prefixed."""
  # sys.stdout is looked up per line, so a caller's redirection (pytest's
  # capture included) is honoured.
  writable = True
  with pipe:
    for line in iter(pipe.readline, b''):
      if not writable:
        continue  # drain anyway: a worker writing to a full pipe would block
      text = line.decode('utf-8', errors='replace')
      if not text.endswith('\n'):
        text += '\n'  # a last line without newline: keep the next one apart
      try:
        with lock:
          stream = getattr(sys, stream_name)
          stream.write(prefix + text)
          stream.flush()
      except (OSError, ValueError):  # a closed stream or pipe (`... | head`)
        writable = False


class _Workers:
  """The worker processes, their output copiers, and signals to them."""

  def __init__(self, command, configs, env, prefix_output):
    self.processes = []
    self._copiers = []
    pipe = subprocess.PIPE if prefix_output else None
    try:
      for config in configs:
        worker_env = dict(os.environ if env is None else env,
                          TF_CONFIG=json.dumps(config))
        if prefix_output:
          # A worker's Python would block-buffer a pipe: lines would come late
          # and out of order with its stderr.
          worker_env.setdefault('PYTHONUNBUFFERED', '1')
        self.processes.append(subprocess.Popen(
            command, env=worker_env, stdout=pipe, stderr=pipe,
            # A session (so a process group) of its own: signals reach workers
            # through the launcher only. (Popen's process_group needs Python 3.11.)
            start_new_session=True,
            preexec_fn=_die_with_parent if _LIBC is not None else None))
    except BaseException:
      self.kill()
      raise
    if prefix_output:
      # Started after every fork: a fork copies no lock a copier holds.
      lock = threading.Lock()
      for index, process in enumerate(self.processes):
        for pipe_of, stream_name in ((process.stdout, 'stdout'),
                                     (process.stderr, 'stderr')):
          copier = threading.Thread(
              target=_copy_lines,
              args=(pipe_of, stream_name, f'[worker {index}] ', lock),
              name=f'launch-worker-{index}-{stream_name}', daemon=True)
          copier.start()
          self._copiers.append(copier)

  def send(self, signum):
    for process in self.processes:
      if process.poll() is None:
        try:
          process.send_signal(signum)
        except ProcessLookupError:
          pass  # exited since poll()

  def kill(self):
    """Kills every worker still running and reaps them all."""
    self.send(signal.SIGKILL)
    for process in self.processes:
      process.wait()

  def join_output(self, timeout_secs=5.0):
    # A worker's own child may hold its pipe open after it exited: do not wait
    # for that forever (the copiers are daemon threads).
    deadline = time.monotonic() + timeout_secs
    for copier in self._copiers:
      copier.join(max(0.0, deadline - time.monotonic()))


def _check_arguments(command, workers, grace_secs):
  if isinstance(command, (str, bytes)) or not isinstance(command, (list, tuple)):
    raise TypeError(f'command={command!r} must be a list of program and arguments, '
                    "e.g. ['python', '-m', 'my.trainer', '--flag', 'x'].")
  if not command:
    raise ValueError('command is empty: give the program each worker runs, e.g. '
                     "['python', '-m', 'my.trainer'].")
  if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
    raise ValueError(f'workers={workers!r}: give the number of worker processes, '
                     'an int >= 1.')
  if (isinstance(grace_secs, bool) or not isinstance(grace_secs, (int, float))
      or grace_secs < 0):
    raise ValueError(f'grace_secs={grace_secs!r}: give the seconds the other '
                     'workers get to exit after one failed, a number >= 0.')


def launch(command, workers, grace_secs=30.0, prefix_output=True, env=None,
           host='localhost'):
  """Runs `command` as `workers` local worker processes and waits for them.

  Args:
    command: The program and its arguments, a list of strings, run by every
      worker.
    workers: The number of worker processes, >= 1.
    grace_secs: Seconds the other workers get to exit after one exits non-zero,
      or every worker after a forwarded signal, before they are killed.
    prefix_output: Copy the workers' stdout and stderr to this process's,
      each line prefixed by `[worker i] `; False lets them write directly.
    env: The workers' environment (default: this process's), to which
      `TF_CONFIG` is added.
    host: The host name in the cluster's addresses.

  Returns:
    0 if every worker exited 0; else the exit code of the first worker (in
    worker order) that failed by itself, 128 + signal for a signal death.

  Raises:
    TypeError, ValueError: for a bad `command`, `workers` or `grace_secs`.
    OSError: the command cannot be started (no worker is left running).
  """
  _check_arguments(command, workers, grace_secs)
  configs = tf_configs(free_ports(workers, host), host)
  # The handler only records a signal; the wait loop forwards it, so a signal
  # that arrives while the workers start is forwarded too, and exactly once.
  pending_signals = []
  handlers = {}
  if threading.current_thread() is threading.main_thread():
    handlers = {signum: signal.signal(signum,
                                      lambda signum, _: pending_signals.append(signum))
                for signum in FORWARDED_SIGNALS}
  try:
    return _wait(_Workers(list(command), configs, env, prefix_output), grace_secs,
                 pending_signals)
  finally:
    for signum, handler in handlers.items():
      signal.signal(signum, handler)


def _running(processes):
  """The indices of the processes still running (polling each one)."""
  return [i for i, process in enumerate(processes) if process.poll() is None]


def _wait(workers, grace_secs, pending_signals):
  """Waits for every worker, forwarding signals; kills the rest `grace_secs`
  after a failure."""
  processes = workers.processes
  killed = set()
  deadline = None
  why = 'a worker failed'
  forwarded = None  # the first signal forwarded
  try:
    while _running(processes):
      while pending_signals:
        forwarded = forwarded or pending_signals[0]
        workers.send(pending_signals.pop(0))
        if deadline is None:  # a worker stuck in a collective op cannot stop
          deadline = time.monotonic() + grace_secs
          why = f'{signal.Signals(forwarded).name} was forwarded'
      if deadline is None and any(process.returncode for process in processes):
        deadline = time.monotonic() + grace_secs
      if deadline is not None and time.monotonic() >= deadline:
        killed = set(_running(processes))
        _log(f'launch: killing worker(s) {sorted(killed)}, still running '
             f'{grace_secs:g} s after {why}.')
        workers.kill()
        break
      time.sleep(_POLL_SECS)
  except BaseException:
    workers.kill()
    raise
  finally:
    workers.join_output()
  codes = [_exit_code(process.returncode) for process in processes]
  failed = [(i, code) for i, code in enumerate(codes) if code and i not in killed]
  if failed:
    _log('launch: ' + ', '.join(f'worker {i} exited with {code}' for i, code in failed)
         + '.')
    return failed[0][1]
  if killed and forwarded:  # stopped by the signal, if not by themselves
    return 128 + forwarded
  return 0


def _log(message):
  print(message, file=sys.stderr, flush=True)


def _parse(argv):
  parser = argparse.ArgumentParser(
      prog='python -m tfmon.examples.launch',
      description='Runs COMMAND as N local worker processes of a multi-worker '
      'cluster, each with its TF_CONFIG.',
      epilog='Example: python -m tfmon.examples.launch --workers 2 -- '
      'python -m tfmon.examples.cifar10 --max_steps 100')
  parser.add_argument('--workers', type=int, required=True,
                      help='number of worker processes (>= 1)')
  parser.add_argument('--grace_secs', type=float, default=30.0,
                      help='seconds the other workers get to exit after one fails, '
                      'or all after a forwarded signal, before they are killed '
                      '(default 30)')
  parser.add_argument('--no_prefix', action='store_true',
                      help="leave the workers' output alone instead of prefixing "
                      "each line with '[worker i] '")
  parser.add_argument('command', nargs=argparse.REMAINDER,
                      help='the program each worker runs, with its arguments, '
                      'after --')
  args = parser.parse_args(argv)
  if args.command[:1] == ['--']:
    args.command = args.command[1:]
  if args.workers < 1:
    parser.error(f'--workers {args.workers}: give at least 1 worker process.')
  if args.grace_secs < 0:
    parser.error(f'--grace_secs {args.grace_secs:g}: give a number of seconds >= 0.')
  if not args.command:
    parser.error('no command: give the program each worker runs after --, e.g. '
                 '-- python -m my.trainer')
  return args


def main(argv=None):
  args = _parse(sys.argv[1:] if argv is None else argv)
  try:
    return launch(args.command, args.workers, args.grace_secs,
                  prefix_output=not args.no_prefix)
  except OSError as e:
    _log(f'launch: cannot run {args.command[0]!r}: {e}')
    return 127  # a shell's code for a command it cannot run


if __name__ == '__main__':
  sys.exit(main())
