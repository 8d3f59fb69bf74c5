"""RunConfig: tf.estimator.RunConfig's arguments, properties and TF_CONFIG reading.

What tfmon does with each setting (TF 2.15's Estimator read them all):
  - checkpoints, summaries, logging, seed: as TF's Estimator;
  - `session_config`: given to the sessions, which warn of what it asks beyond
    TF2's defaults (configure `tf.config` instead);
  - `device_fn`: the device function the graphs are built under, as TF's;
  - `train_distribute`: None, a `OneDeviceStrategy` (the device the model_fn
    is built on), a `MirroredStrategy` or a `MultiWorkerMirroredStrategy`
    over TF_CONFIG's chief and workers: trains as TF's Estimator did, the
    model_fn once per replica (estimator/replicated.py);
  - `eval_distribute`: None, or either strategy: evaluation runs unreplicated
    on its first device (and says so), `steps` counting batches of input_fn;
    any other strategy is refused, naming the fix;
  - TF_CONFIG's `cluster` and `task`: read as TF read them (`cluster_spec`,
    `task_type`, `task_id`, `is_chief`, `master`, `num_ps_replicas`,
    `num_worker_replicas`, `global_id_in_cluster`); under a
    MultiWorkerMirroredStrategy a cluster of workers alone is taken too
    (worker 0 the chief), as TF 2.15's independent-worker mode took it. An
    Estimator trains on several tasks only under that strategy spanning the
    chief and workers, with no parameter servers (docs/distribution.md); an
    evaluator task evaluates (train_and_evaluate);
  - `protocol`, `experimental_max_worker_delay_secs`,
    `session_creation_timeout_secs`: kept, and read by nothing tfmon runs
    (the strategy starts the servers; no session waits for a chief);
  - `experimental_distribute`: refused (a TF 1.x DistributeConfig).
"""

import copy
import inspect
import json
import os

import tensorflow as tf

from tfmon import tf_logging as logging

_USE_DEFAULT = object()

# The arguments `replace` may change, as TF's.
_REPLACEABLE = (
    'model_dir', 'tf_random_seed', 'save_summary_steps', 'save_checkpoints_steps',
    'save_checkpoints_secs', 'session_config', 'keep_checkpoint_max',
    'keep_checkpoint_every_n_hours', 'log_step_count_steps', 'train_distribute',
    'device_fn', 'protocol', 'eval_distribute', 'experimental_distribute',
    'experimental_max_worker_delay_secs', 'session_creation_timeout_secs',
    'checkpoint_save_graph_def')


class TaskType:
  """TF_CONFIG's task types, as tf.estimator's RunConfig named them."""
  MASTER = 'master'
  PS = 'ps'
  WORKER = 'worker'
  CHIEF = 'chief'
  EVALUATOR = 'evaluator'


def check_strategy(strategy, name):
  """Returns `strategy` (None, a OneDeviceStrategy or a MirroredStrategy, or
  for training a MultiWorkerMirroredStrategy); refuses any other."""
  if strategy is None or isinstance(strategy, tf.distribute.OneDeviceStrategy):
    return strategy
  if name == 'train_distribute' and isinstance(
      strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return strategy  # one Estimator per worker process (TF_CONFIG's chief and workers)
  if isinstance(strategy, tf.distribute.MirroredStrategy):
    if name == 'eval_distribute' and strategy.num_replicas_in_sync > 1:
      logging.info('eval_distribute=%r: evaluation runs unreplicated, on the '
                   "strategy's first device; `steps` counts batches of input_fn.",
                   strategy)
    return strategy
  raise ValueError(
      f'{name}={strategy!r}: tfmon.estimator runs a model_fn under '
      'tf.distribute.MirroredStrategy (the devices of this process), '
      'OneDeviceStrategy or none' + (
          ', or trains on several processes under MultiWorkerMirroredStrategy '
          '(docs/distribution.md).' if name == 'train_distribute' else
          '; it evaluates in one process.'))


def strategy_device(strategy):
  """The device a OneDeviceStrategy computes on (a MirroredStrategy's first),
  or None."""
  if strategy is None:
    return None
  return strategy.extended.worker_devices[0]


class RunConfig:
  """tf.estimator.RunConfig: how an Estimator trains, and where (TF_CONFIG).

  Args:
    model_dir: Where checkpoints and event files go (the Estimator's wins;
      TF_CONFIG's `model_dir` when neither is given).
    tf_random_seed: The graph-level random seed.
    save_summary_steps: Record summaries every N steps.
    save_checkpoints_steps: Save every N steps (not with `save_checkpoints_secs`).
    save_checkpoints_secs: Save every N seconds (600 when neither is given; both
      None: no checkpoints, as TF1).
    session_config: A `tf.compat.v1.ConfigProto` for the sessions, which warn
      of what they do not apply.
    keep_checkpoint_max: Checkpoints kept.
    keep_checkpoint_every_n_hours: Also keep one every N hours.
    log_step_count_steps: Log the loss and the step rate every N steps.
    train_distribute: None, a `tf.distribute.OneDeviceStrategy`, a
      `tf.distribute.MirroredStrategy` or a `MultiWorkerMirroredStrategy`
      (the model_fn built per replica).
    device_fn: `device_fn(op)` returning the device of each op of the graphs.
    protocol: The servers' protocol (kept; tfmon starts no servers).
    eval_distribute: None, or either strategy (evaluation runs unreplicated
      on its first device).
    experimental_distribute: Must be None.
    experimental_max_worker_delay_secs: Kept (non-chief workers waited; tfmon
      trains one process).
    session_creation_timeout_secs: Kept (sessions waited for a chief).
    checkpoint_save_graph_def: Whether checkpoints come with their graph.

  Raises:
    ValueError: both save_checkpoints_steps and save_checkpoints_secs, a
      strategy other than those, `experimental_distribute`, a
      `device_fn` not taking `op`, a `model_dir` that TF_CONFIG contradicts, or
      a TF_CONFIG TF's RunConfig refused.
  """

  def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
               save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
               session_config=None, keep_checkpoint_max=5,
               keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
               train_distribute=None, device_fn=None, protocol=None,
               eval_distribute=None, experimental_distribute=None,
               experimental_max_worker_delay_secs=None,
               session_creation_timeout_secs=7200, checkpoint_save_graph_def=True):
    # TF1's defaults: every 600 seconds when neither is given; none when both
    # are given as None.
    if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_steps, save_checkpoints_secs = None, 600
    elif save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_secs = None
    elif save_checkpoints_steps is _USE_DEFAULT:
      save_checkpoints_steps = None
    elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
      raise ValueError('Can not provide both save_checkpoints_steps and '
                       'save_checkpoints_secs.')
    tf_config = json.loads(os.environ.get('TF_CONFIG') or '{}')
    if tf_config:
      logging.info('TF_CONFIG environment variable: %s', tf_config)
    self._set(
        model_dir=_model_dir(tf_config, model_dir), tf_random_seed=tf_random_seed,
        save_summary_steps=save_summary_steps,
        save_checkpoints_steps=save_checkpoints_steps,
        save_checkpoints_secs=save_checkpoints_secs, session_config=session_config,
        keep_checkpoint_max=keep_checkpoint_max,
        keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
        log_step_count_steps=log_step_count_steps, train_distribute=train_distribute,
        device_fn=device_fn, protocol=protocol, eval_distribute=eval_distribute,
        experimental_distribute=experimental_distribute,
        experimental_max_worker_delay_secs=experimental_max_worker_delay_secs,
        session_creation_timeout_secs=session_creation_timeout_secs,
        checkpoint_save_graph_def=checkpoint_save_graph_def)
    self._read_cluster(tf_config)

  def _set(self, **values):
    """Checks and sets the replaceable settings."""
    check_strategy(values['train_distribute'], 'train_distribute')
    check_strategy(values['eval_distribute'], 'eval_distribute')
    if values['experimental_distribute'] is not None:
      raise ValueError(
          f'experimental_distribute={values["experimental_distribute"]!r}: TF 1.x '
          "DistributeConfig is not supported; leave it None (tfmon.estimator trains "
          'in one process).')
    device_fn = values['device_fn']
    if device_fn is not None:
      if not callable(device_fn):
        raise ValueError(f'device_fn={device_fn!r} must be callable: device_fn(op) '
                         'returning a device string.')
      arguments = set(inspect.signature(device_fn).parameters)
      if arguments - {'op'}:
        raise ValueError(f'device_fn has arguments {sorted(arguments - {"op"})}: it '
                         "takes one, 'op'.")
    session_config = values['session_config']
    if session_config is not None and not isinstance(
        session_config, tf.compat.v1.ConfigProto):
      raise ValueError(f'session_config={session_config!r} must be a '
                       'tf.compat.v1.ConfigProto (or None).')
    for key, value in values.items():
      setattr(self, f'_{key}', value)

  def _read_cluster(self, tf_config):
    """TF_CONFIG's cluster and task, read as TF's RunConfig read them."""
    self._service = tf_config.get('service')
    if self._service is not None and not isinstance(self._service, dict):
      raise TypeError('If "service" is set in TF_CONFIG, it must be a dict. Given '
                      f'{type(self._service)}')
    self._cluster_spec = tf.train.ClusterSpec(tf_config.get('cluster', {}))
    task = tf_config.get('task', {})
    self._evaluation_master = ''
    if not self._cluster_spec.jobs:
      self._task_type = task.get('type', TaskType.WORKER)
      self._task_id = int(task.get('index', 0))
      if self._task_type != TaskType.WORKER:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be '
                         'WORKER.')
      if self._task_id != 0:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
      self._master = tf_config.get('session_master', '')
      self._evaluation_master = tf_config.get('eval_session_master', '')
      self._is_chief = True
      self._num_ps_replicas = 0
      self._num_worker_replicas = 1
      self._global_id_in_cluster = 0
      return
    jobs = self._cluster_spec.jobs
    chief = TaskType.MASTER if TaskType.MASTER in jobs else TaskType.CHIEF
    if (chief == TaskType.CHIEF and chief not in jobs and isinstance(
        self._train_distribute, tf.distribute.MultiWorkerMirroredStrategy)):
      # TF 2.15's independent-worker mode took workers alone: worker 0 leads.
      chief = None
    if chief == TaskType.MASTER and TaskType.CHIEF in jobs:
      raise ValueError('If `master` node exists in `cluster`, job `chief` is not '
                       'supported.')
    self._task_type, self._task_id = _task(self._cluster_spec, task, chief)
    if self._task_type == TaskType.EVALUATOR:
      if chief == TaskType.MASTER:
        raise ValueError('If `master` node exists in `cluster`, task_type '
                         '`evaluator` is not supported.')
      self._evaluation_master = tf_config.get('eval_session_master', '')
      self._cluster_spec = tf.train.ClusterSpec({})
      self._master = ''
      self._num_ps_replicas = 0
      self._num_worker_replicas = 0
      self._global_id_in_cluster = None
    else:
      if 'session_master' in tf_config:
        self._master = tf_config['session_master']
      elif len(jobs) == 1 and self._cluster_spec.num_tasks(jobs[0]) == 1:
        self._master = ''
      else:
        self._master = ('grpc://' +
                        self._cluster_spec.task_address(self._task_type, self._task_id))
      tasks = self._cluster_spec.as_dict()
      self._num_ps_replicas = len(tasks.get(TaskType.PS, []))
      self._num_worker_replicas = (len(tasks.get(TaskType.WORKER, [])) +
                                   len(tasks.get(chief, [])))
      order = [chief] * bool(chief) + [t for t in sorted(jobs)
                                       if t not in (chief, TaskType.PS)]
      order += [TaskType.PS] if TaskType.PS in jobs else []
      first = 0
      for job in order:
        if job == self._task_type:
          break
        first += self._cluster_spec.num_tasks(job)
      self._global_id_in_cluster = first + self._task_id
    self._is_chief = (self._task_type == chief if chief else
                      (self._task_type, self._task_id) == (TaskType.WORKER, 0))

  def training_cluster_size(self):
    """How many processes TF_CONFIG says train (1: none but this one)."""
    return self._num_worker_replicas + self._num_ps_replicas

  def replace(self, **kwargs):
    """A copy with the given settings replaced (those TF's `replace` allowed).

    Raises:
      ValueError: a setting `replace` cannot change, or a bad value.
    """
    unknown = sorted(set(kwargs) - set(_REPLACEABLE))
    if unknown:
      raise ValueError(f'{unknown} cannot be replaced: replace takes '
                       f'{list(_REPLACEABLE)}.')
    if (kwargs.get('save_checkpoints_steps') is not None and
        kwargs.get('save_checkpoints_secs') is not None):
      raise ValueError('Can not provide both save_checkpoints_steps and '
                       'save_checkpoints_secs.')
    new = copy.copy(self)
    values = {key: getattr(self, f'_{key}') for key in _REPLACEABLE}
    # As TF's: replacing one of the two checkpoint schedules turns the other off.
    if kwargs.get('save_checkpoints_steps') is not None:
      values['save_checkpoints_secs'] = None
    if kwargs.get('save_checkpoints_secs') is not None:
      values['save_checkpoints_steps'] = None
    values.update(kwargs)
    new._set(**values)  # pylint: disable=protected-access
    if 'train_distribute' in kwargs:  # it decides how TF_CONFIG reads, as TF's
      new._read_cluster(json.loads(os.environ.get('TF_CONFIG') or '{}'))  # pylint: disable=protected-access
    return new

  # Properties, as TF's RunConfig had them.
  model_dir = property(lambda self: self._model_dir)
  tf_random_seed = property(lambda self: self._tf_random_seed)
  save_summary_steps = property(lambda self: self._save_summary_steps)
  save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
  save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
  session_config = property(lambda self: self._session_config)
  keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
  keep_checkpoint_every_n_hours = property(
      lambda self: self._keep_checkpoint_every_n_hours)
  log_step_count_steps = property(lambda self: self._log_step_count_steps)
  train_distribute = property(lambda self: self._train_distribute)
  eval_distribute = property(lambda self: self._eval_distribute)
  device_fn = property(lambda self: self._device_fn)
  protocol = property(lambda self: self._protocol)
  experimental_max_worker_delay_secs = property(
      lambda self: self._experimental_max_worker_delay_secs)
  session_creation_timeout_secs = property(
      lambda self: self._session_creation_timeout_secs)
  checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)
  cluster_spec = property(lambda self: self._cluster_spec)
  task_type = property(lambda self: self._task_type)
  task_id = property(lambda self: self._task_id)
  is_chief = property(lambda self: self._is_chief)
  master = property(lambda self: self._master)
  evaluation_master = property(lambda self: self._evaluation_master)
  num_ps_replicas = property(lambda self: self._num_ps_replicas)
  num_worker_replicas = property(lambda self: self._num_worker_replicas)
  global_id_in_cluster = property(lambda self: self._global_id_in_cluster)
  service = property(lambda self: self._service)


def _model_dir(tf_config, model_dir):
  """`model_dir`, else TF_CONFIG's; they must agree when both are given."""
  model_dir = os.fspath(model_dir) if model_dir is not None else None
  from_config = tf_config.get('model_dir')
  if model_dir and from_config and model_dir != from_config:
    raise ValueError(f'model_dir={model_dir!r} and TF_CONFIG\'s model_dir '
                     f'{from_config!r} differ: give one.')
  return model_dir or from_config


def _task(cluster_spec, task, chief):
  """`(task_type, task_id)` of TF_CONFIG's task, checked as TF checked them
  (`chief` None: a cluster of workers, MultiWorkerMirroredStrategy's)."""
  if chief and chief not in cluster_spec.jobs:
    raise ValueError(f'If "cluster" is set in TF_CONFIG, it must have one "{chief}" '
                     'node.')
  if chief and cluster_spec.num_tasks(chief) > 1:
    raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief}" node.')
  task_type, task_id = task.get('type'), task.get('index')
  if not task_type:
    raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
  if task_id is None:
    raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
  task_id = int(task_id)
  if task_id < 0:
    raise ValueError('Task index must be non-negative number.')
  if task_type == TaskType.EVALUATOR:
    return task_type, task_id
  if task_type not in cluster_spec.jobs:
    raise ValueError(f'{task_type} is not a valid task_type in the cluster_spec:\n'
                     f'{cluster_spec}\n\nNote that these values may be coming from '
                     'the TF_CONFIG environment variable.')
  if not 0 <= task_id < cluster_spec.num_tasks(task_type):
    raise ValueError(f'{task_id} is not a valid task_id for task_type {task_type} in '
                     f'the cluster_spec:\n{cluster_spec}\n\nNote that these values '
                     'may be coming from the TF_CONFIG environment variable.')
  return task_type, task_id
