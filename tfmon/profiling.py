"""TF2 profiler traces of single runs, for TensorBoard's Profile tab.

Used by ProfilerHook (a run every N steps or seconds) and by sessions for a run
whose RunOptions ask for a trace (v1's FULL_TRACE).
"""

import os

from tfmon import tf_logging as logging
import tensorflow as tf

# The staging directory of the trace started and not stopped, or None.
# TensorFlow allows one profiler per process, and a run that raises between
# ProfilerHook's before_run (start) and after_run (stop) leaves it running: the
# session calls no hook on the way out, not even end(). The next ProfilerHook to
# begin a session, or the next trace to start (after a recovery), discards it.
_unfinished_trace = None


def _remove(directory):
  if tf.io.gfile.exists(directory):
    tf.io.gfile.rmtree(directory)


def discard_unfinished_trace():
  """Stops and deletes a trace a run that raised left running, if any."""
  global _unfinished_trace
  if _unfinished_trace is None:
    return
  logging.warning('Discarding the profile of a run that raised before it ended.')
  try:
    tf.profiler.experimental.stop(save=False)
  except tf.errors.UnavailableError:
    pass  # someone else stopped it
  _remove(_unfinished_trace)
  _unfinished_trace = None


class Traces:
  """Single runs' TF2 profiler traces under `<output_dir>/plugins/profile`.

  Each trace is staged alone (in a per-process directory) and then moved into a
  run directory named by the profiler's timestamp and the step,
  `<time>_step_<step>/<host>.xplane.pb`, which TensorBoard's Profile tab reads.
  The profiler names a run by the second it was saved in, so two traces saved
  within one second would otherwise share (and overwrite) one run.
  """

  def __init__(self, output_dir):
    self._profile_dir = os.path.join(output_dir, 'plugins', 'profile')
    self._staging_dir = os.path.join(output_dir, f'.profiler-staging-{os.getpid()}')

  def start(self, who):
    """Starts the profiler; returns False (`who` warns why) if another one runs."""
    global _unfinished_trace
    discard_unfinished_trace()
    _remove(self._staging_dir)  # left by a process that died while saving
    try:
      tf.profiler.experimental.start(self._staging_dir)
    except tf.errors.AlreadyExistsError:
      logging.warning(
          '%s could not profile this step: another profiler is running '
          '(tf.profiler.experimental.start, a profiler server or the Keras '
          'TensorBoard callback). Stop it first.', who)
      return False
    _unfinished_trace = self._staging_dir
    return True

  def stop(self):
    """Stops the profiler, which writes its trace into the staging directory."""
    global _unfinished_trace
    _unfinished_trace = None
    tf.profiler.experimental.stop()

  def save(self, step):
    """Moves the staged trace into its run directory; returns that directory."""
    staged_profile_dir = os.path.join(self._staging_dir, 'plugins', 'profile')
    runs = tf.io.gfile.listdir(staged_profile_dir)
    if len(runs) != 1:
      raise RuntimeError(f'The profiler wrote {runs} into {staged_profile_dir}; '
                         'tfmon expected one run.')
    timestamp = runs[0].rstrip('/')
    run_dir = os.path.join(self._profile_dir, f'{timestamp}_step_{step}')
    staged_run_dir = os.path.join(staged_profile_dir, timestamp)
    # File by file, as gfile renames files on every file system (GCS included).
    for root, _, files in tf.io.gfile.walk(staged_run_dir):
      target = os.path.join(run_dir, os.path.relpath(root, staged_run_dir))
      tf.io.gfile.makedirs(target)
      for name in files:
        tf.io.gfile.rename(os.path.join(root, name), os.path.join(target, name),
                           overwrite=True)
    _remove(self._staging_dir)
    return run_dir
