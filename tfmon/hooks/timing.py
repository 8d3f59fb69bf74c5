"""When a periodic hook next needs to see a run: one rule for every hook.

Each periodic hook keeps TensorFlow's `SecondOrStepTimer`; this turns its state
into the `steps_until_observed` answer the session's ObservationSchedule asks for.
"""


def steps_until_trigger(timer, every_steps, step):
  """Steps from `step` until `timer` triggers on the step count.

  Args:
    timer: A `tf.compat.v1.train.SecondOrStepTimer`.
    every_steps: Its period in steps, or None when it counts seconds.
    step: The current step (global step, or a hook's own iteration count).

  Returns:
    A positive int: 1 when the timer counts seconds or has not triggered yet,
    as such a hook must see every run.
  """
  last = timer.last_triggered_step()
  if every_steps is None or last is None:
    return 1
  return max(1, last + every_steps - step)
