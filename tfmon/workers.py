"""The workers of a multi-worker strategy: how many, which one is the chief, and
what to say when one of them is lost."""

import re

import tensorflow as tf

# How TensorFlow names a task in its errors: /job:worker/replica:0/task:1.
_TASK = re.compile(r'/job:(\w+)/replica:\d+/task:(\d+)')


def count(strategy):
  """How many worker processes `strategy` spans (1 for a single-process one)."""
  resolver = getattr(strategy, 'cluster_resolver', None)
  if resolver is None:
    return 1
  jobs = resolver.cluster_spec().as_dict()
  return max(1, sum(len(jobs[job]) for job in ('chief', 'worker') if job in jobs))


def current(strategy=None):
  """`strategy` (else the one in scope) if it spans several workers, else None."""
  if strategy is None:
    strategy = tf.distribute.get_strategy()
  return strategy if count(strategy) > 1 else None


def is_chief(strategy):
  """Whether this process is the chief: the 'chief' task, else worker 0 (TF's rule)."""
  resolver = strategy.cluster_resolver
  jobs = resolver.cluster_spec().as_dict()
  if 'chief' in jobs:
    return resolver.task_type == 'chief'
  return resolver.task_type == 'worker' and resolver.task_id == 0


def index(strategy):
  """This worker's place among `strategy`'s workers: the chief's 0, then the
  workers' in order (TF's input pipeline ids)."""
  resolver = strategy.cluster_resolver
  if resolver.task_type == 'chief':
    return 0
  return resolver.task_id + len(resolver.cluster_spec().as_dict().get('chief', []))


def name(strategy):
  """This process's task, as `worker 1` or `chief 0`."""
  resolver = strategy.cluster_resolver
  return f'{resolver.task_type} {resolver.task_id}'


def lost(error, strategy):
  """`error` (a collective call failing) as an error naming the worker lost.

  TensorFlow names the task whose connection failed in the message; when it
  does not, the message says another worker.
  """
  tasks = [f'{job} {task}' for job, task in _TASK.findall(str(error))
           if f'{job} {task}' != name(strategy)]
  who = tasks[0] if tasks else 'another worker'
  return type(error)(
      error.node_def, error.op,
      f'{name(strategy).capitalize()} lost {who} of its multi-worker strategy: '
      f'{who} stopped (failed, was killed, exited, or its input ended before '
      f'this worker\'s: every worker needs as many batches) while this worker waited '
      f'for it in a collective op, so training cannot go on. Fix or restart '
      f'{who}\'s process and start every worker again: they resume from the '
      f'latest checkpoint. TensorFlow said: {error.message}')
