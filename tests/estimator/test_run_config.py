"""RunConfig: TF 2.15's settings and properties, and TF_CONFIG read as TF read it."""

import json
import logging

import pytest
import tensorflow as tf

from tfmon import estimator


def _tf_config(monkeypatch, **config):
  monkeypatch.setenv('TF_CONFIG', json.dumps(config))


def test_without_tf_config_this_process_is_the_chief_of_a_one_worker_cluster(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  config = estimator.RunConfig()
  assert config.cluster_spec.as_dict() == {}
  assert (config.task_type, config.task_id, config.is_chief, config.master) == (
      'worker', 0, True, '')
  assert (config.num_ps_replicas, config.num_worker_replicas,
          config.global_id_in_cluster, config.evaluation_master) == (0, 1, 0, '')
  assert (config.session_config, config.device_fn, config.protocol,
          config.eval_distribute, config.experimental_max_worker_delay_secs,
          config.session_creation_timeout_secs, config.checkpoint_save_graph_def,
          config.service) == (None, None, None, None, None, 7200, True, None)


def test_tf_configs_cluster_and_task_are_read_as_tf_read_them(monkeypatch):
  cluster = {'chief': ['host0:2222'], 'ps': ['host1:2222', 'host2:2222'],
             'worker': ['host3:2222', 'host4:2222', 'host5:2222']}
  _tf_config(monkeypatch, cluster=cluster, task={'type': 'worker', 'index': 1})
  config = estimator.RunConfig()
  assert config.cluster_spec.as_dict() == cluster
  assert (config.task_type, config.task_id, config.is_chief) == ('worker', 1, False)
  assert config.master == 'grpc://host4:2222'
  # TF's numbering: the chief, the other jobs by name, the ps last.
  assert (config.num_ps_replicas, config.num_worker_replicas,
          config.global_id_in_cluster) == (2, 4, 2)
  _tf_config(monkeypatch, cluster=cluster, task={'type': 'ps', 'index': 1})
  assert estimator.RunConfig().global_id_in_cluster == 5
  _tf_config(monkeypatch, cluster=cluster, task={'type': 'chief', 'index': 0})
  assert estimator.RunConfig().is_chief
  _tf_config(monkeypatch, cluster=cluster, task={'type': 'evaluator', 'index': 0})
  evaluator = estimator.RunConfig()
  assert (evaluator.cluster_spec.as_dict(), evaluator.num_worker_replicas,
          evaluator.is_chief, evaluator.global_id_in_cluster) == ({}, 0, False, None)


def test_tf_config_model_dir_and_session_master(monkeypatch, tmp_path):
  _tf_config(monkeypatch, model_dir=str(tmp_path), session_master='grpc://x:1')
  config = estimator.RunConfig()
  assert (config.model_dir, config.master) == (str(tmp_path), 'grpc://x:1')
  with pytest.raises(ValueError, match="TF_CONFIG's model_dir"):
    estimator.RunConfig(model_dir=str(tmp_path / 'other'))


@pytest.mark.parametrize('config, message', [
    ({'cluster': {'worker': ['a:1']}, 'task': {'type': 'worker', 'index': 0}},
     'must have one "chief" node'),
    ({'cluster': {'chief': ['a:1']}, 'task': {'index': 0}}, 'task type must be set'),
    ({'cluster': {'chief': ['a:1']}, 'task': {'type': 'worker', 'index': 0}},
     'worker is not a valid task_type'),
    ({'cluster': {'chief': ['a:1'], 'worker': ['b:1']},
      'task': {'type': 'worker', 'index': 3}}, '3 is not a valid task_id'),
    ({'task': {'type': 'ps'}}, 'task type must be WORKER'),
])
def test_a_tf_config_tf_refused_is_refused(monkeypatch, config, message):
  _tf_config(monkeypatch, **config)
  with pytest.raises(ValueError, match=message):
    estimator.RunConfig()


def test_an_estimator_refuses_a_cluster_its_strategy_does_not_span(monkeypatch):
  _tf_config(monkeypatch, cluster={'chief': ['a:1'], 'worker': ['b:1']},
             task={'type': 'chief', 'index': 0})
  with pytest.raises(ValueError, match='cluster of 2 workers and 0 parameter servers'
                     r'.*train_distribute=None spans 1.*MultiWorkerMirroredStrategy\(\)\) '
                     'over the chief and workers.*unset TF_CONFIG'):
    estimator.Estimator(lambda features, labels, mode: None)
  _tf_config(monkeypatch, cluster={'chief': ['a:1'], 'ps': ['b:1']},
             task={'type': 'chief', 'index': 0})
  with pytest.raises(ValueError, match='1 workers and 1 parameter servers.*without '
                     'parameter servers'):
    estimator.Estimator(lambda features, labels, mode: None)
  # An evaluator task evaluates what the cluster trains.
  _tf_config(monkeypatch, cluster={'chief': ['a:1'], 'worker': ['b:1']},
             task={'type': 'evaluator', 'index': 0})
  assert estimator.Estimator(lambda features, labels, mode: None).config.task_type == 'evaluator'
  _tf_config(monkeypatch, cluster={'chief': ['a:1']}, task={'type': 'chief', 'index': 0})
  assert estimator.Estimator(lambda features, labels, mode: None).config.is_chief


def test_replace_takes_what_tfs_took_and_checks_it():
  config = estimator.RunConfig(save_checkpoints_steps=5, tf_random_seed=3)
  replaced = config.replace(save_checkpoints_secs=60, keep_checkpoint_max=2)
  assert (replaced.save_checkpoints_secs, replaced.save_checkpoints_steps,
          replaced.keep_checkpoint_max, replaced.tf_random_seed) == (60, None, 2, 3)
  assert config.save_checkpoints_steps == 5  # unchanged
  with pytest.raises(ValueError, match=r"\['task_type'\] cannot be replaced"):
    config.replace(task_type='ps')
  with pytest.raises(ValueError, match='train_distribute=.*OneDeviceStrategy or none'):
    config.replace(train_distribute=tf.distribute.experimental.CentralStorageStrategy(
        ['/cpu:0']))


@pytest.mark.parametrize('arguments, message', [
    ({'eval_distribute': tf.distribute.experimental.CentralStorageStrategy(['/cpu:0'])},
     'eval_distribute='),
    ({'experimental_distribute': object()}, 'experimental_distribute='),
    ({'device_fn': lambda op, other: ''}, r"device_fn has arguments \['other'\]"),
    ({'session_config': {'allow_soft_placement': True}}, 'ConfigProto'),
])
def test_misuse_is_refused_naming_the_fix(arguments, message):
  with pytest.raises(ValueError, match=message):
    estimator.RunConfig(**arguments)


def test_session_config_reaches_the_sessions_which_say_what_they_ignore(tmp_path, caplog):
  caplog.set_level(logging.WARNING)

  def model_fn(features, labels, mode):
    del labels
    w = tf.compat.v1.get_variable('w', [], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean((features - w) ** 2)
    return estimator.EstimatorSpec(
        mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.1).minimize(loss, tf.compat.v1.train.get_global_step()))

  config = estimator.RunConfig(
      session_config=tf.compat.v1.ConfigProto(log_device_placement=True))
  model = estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
  model.train(lambda: tf.data.Dataset.from_tensors(tf.ones([2])).repeat(), max_steps=1)
  assert 'config sets log_device_placement, which tfmon does not apply' in caplog.text
