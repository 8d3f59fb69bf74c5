"""ObservationSchedule: which hooks see a run, and how many steps the run fuses.

A hook may tell the session when it next needs to see a run (a tfmon extension
of the v1 protocol, duck-typed so v1 hooks need nothing):

  - `steps_until_observed(global_step)`: the hook must observe the run that
    brings the global step to `global_step + n` (n >= 1), or never (None). Until
    then its `before_run`/`after_run` are not called, and runs may fuse steps.
  - `observes_fused_runs = True`: the hook is called on every run, and a run may
    be several steps; its fetches see the last one. It may also define
    `steps_until_observed` to end fused runs at its trigger steps.
  - neither (every v1 hook): the hook is called on every run, and every run is
    exactly one step, so legacy hooks keep v1's semantics to the letter. So is a
    subclass overriding `before_run` or `after_run` of the class that declared.

Every call sets `run_context.steps_run` for the hook being called: the number of
steps since that hook last saw a run, this run's included.

The schedule tracks the global step (read once, then as each run leaves it:
counted when the run adds a known constant, else read with its outputs; see
HookedSession), so a run costs O(1) Python for idle hooks; the hooks due are
only gathered when the run reaches the earliest due step. A step is expected
to add to the global step what steps added in the last two runs (one, unless a
train op adds more: TF1's hooks saw the run that crossed their step then too).
"""

import math


def declares_schedule(hook):
  return ((hasattr(hook, 'steps_until_observed') or
           getattr(hook, 'observes_fused_runs', False)) and
          _schedule_covers_run_methods(type(hook)))


def _schedule_covers_run_methods(cls):
  """Whether a hook's schedule was declared for the `before_run`/`after_run` it
  runs. A subclass of one of tfmon's hooks (TF's, renamed) that overrides
  either was written against TF's class (counting `_iter_count` itself, say): it
  needs every run, one step each, as on TF's class, and the schedule tfmon's
  class declared does not speak for it. A user's own scheduled hook passes its
  schedule on to its subclasses."""
  def owner(name):
    return next((klass for klass in cls.__mro__ if name in vars(klass)), None)
  declarers = [klass for klass in (owner('steps_until_observed'),
                                   owner('observes_fused_runs'))
               if klass is not None and klass.__module__.startswith('tfmon.')]
  if not declarers:  # the user's own, or declared on the instance
    return True
  return all(any(issubclass(declarer, owner(method)) for declarer in declarers)
             for method in ('before_run', 'after_run'))


class ObservationSchedule:
  """Plans each run: how many steps, and which hooks observe it.

  Args:
    hooks: The session's hooks, in order.
    steps_per_loop: At most this many steps per run.
    global_step: The global step variable.
  """

  def __init__(self, hooks, steps_per_loop, global_step):
    self._hooks = hooks
    self._steps_per_loop = steps_per_loop
    self.global_step = global_step
    # Hooks that see every run; a legacy one among them keeps runs to one step.
    self._every_run = [h for h in hooks if not declares_schedule(h) or
                       getattr(h, 'observes_fused_runs', False)]
    self._every_run_set = set(self._every_run)
    self._single_steps = any(not declares_schedule(h) for h in hooks)
    # Whether runs that can fuse steps go through the fused loop, one step
    # included: the session then compiles one function, not two.
    self.fuses = steps_per_loop > 1 and not self._single_steps
    self._bounding = [h for h in hooks if declares_schedule(h) and
                      hasattr(h, 'steps_until_observed')]
    # Hooks that see every run but also end fused runs at their own steps: asked
    # again after every run. The others that declare a step are skipped until it.
    self._rebounding = [h for h in self._bounding if h in self._every_run_set]
    self._skippable = [h for h in self._bounding if h not in self._every_run_set]
    self._due = {}  # hook -> global step it must observe next (inf: never)
    self._next_due = None  # the earliest due step; None until the first plan
    self.value = None  # the global step value after the last run
    self._stride = 1  # what a step added to the global step, the last two runs
    self._added_last = 1  # what a step added in the last run
    self.hooks_due = False  # whether the run planned last is a hook's due run
    self._steps_total = 0
    # Skippable hook -> self._steps_total when it last saw a run.
    self._last_seen = dict.fromkeys(self._skippable, 0)
    # For the run planned last: skippable hook due in it -> the steps it missed
    # since it last saw a run. `run_context.steps_run` is the run's steps plus
    # this (every-run hooks missed none).
    self.missed = {}

  def plan(self, fetches_are_fusible):
    """Returns `(steps, hooks)` for the next run: its step budget and observers."""
    if self.value is None:  # first, or forgotten: calls the session did not make ran
      self.value = int(self.global_step.numpy())
    if self._next_due is None:
      for hook in self._bounding:
        self._reschedule(hook)
      self._next_due = min(self._due.values(), default=math.inf)
    steps = 1
    if fetches_are_fusible and self.fuses:
      steps = self._steps_per_loop
      if self._next_due != math.inf:
        runs_to_due = math.ceil((self._next_due - self.value) / self._stride)
        steps = max(1, min(steps, runs_to_due))
    self.hooks_due = self.value + steps * self._stride >= self._next_due
    if not self.hooks_due:
      if self.missed:
        self.missed = {}
      return steps, self._every_run
    end = self.value + steps * self._stride
    self.missed = {h: self._steps_total - self._last_seen[h]
                   for h in self._skippable if self._due[h] <= end}
    return steps, [h for h in self._hooks if h in self._every_run_set or
                   h in self.missed]

  @property
  def target(self):
    """The global step at which the next run must end (a hook's due step)."""
    return self._next_due

  def after_run(self, global_step_value, steps_run):
    """Records the run planned last: the global step it reached and its steps."""
    if self.value is not None and steps_run:
      # Two runs in a row, so that a change made outside runs is not taken
      # for what steps add.
      added = math.ceil((global_step_value - self.value) / steps_run)
      self._stride = max(1, min(added, self._added_last))
      self._added_last = added
    self.value = global_step_value
    self._steps_total += steps_run
    for hook in self.missed:
      self._last_seen[hook] = self._steps_total
      self._reschedule(hook)
    for hook in self._rebounding:
      self._reschedule(hook)
    if self.missed or self._rebounding:
      self._next_due = min(self._due.values(), default=math.inf)

  def _reschedule(self, hook):
    steps = hook.steps_until_observed(self.value)
    self._due[hook] = math.inf if steps is None else self.value + max(1, steps)
