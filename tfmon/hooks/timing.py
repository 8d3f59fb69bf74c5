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


class NeverTriggerTimer:
  """TF's `NeverTriggerTimer` (not exported by `tf.compat.v1.train`): the timer
  of a hook that acts only at end, so subclasses find a timer there, as on TF's."""

  def reset(self):
    pass

  def should_trigger_for_step(self, step):
    del step
    return False

  def update_last_triggered_step(self, step):
    del step
    return (None, None)

  def last_triggered_step(self):
    return None
