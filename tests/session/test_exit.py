"""A process ends promptly after its sessions: nothing tfmon traced keeps a
tf.data iterator alive into the interpreter's teardown, where destroying it
waited for tf.data's threads (the test suite's process once hung there)."""

import os
import subprocess
import sys
import time

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A strategy's all-reduce is a tf.custom_gradient: traced, it registers its
# graph in TensorFlow's gradient registry for good, and with the graph the
# iterator the step captured.
_PROGRAM = """
import gc
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices('CPU')[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import tfmon

def iterators_alive():
  gc.collect()
  return sum(1 for obj in gc.get_objects() if type(obj).__name__ == 'EagerTensor'
             and obj.dtype == tf.resource and 'IteratorResource' in repr(obj))

strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
with strategy.scope():
  model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
  optimizer = tf.keras.optimizers.SGD(0.1)
  global_step = tfmon.train.get_or_create_global_step()

def train():
  dataset = tf.data.Dataset.from_tensor_slices((tf.ones([64, 4]), tf.ones([64, 1])))
  batches = iter(strategy.experimental_distribute_dataset(
      dataset.repeat().map(lambda x, y: (x * 2, y)).batch(8).prefetch(2)))

  def step():
    def replica(x, y):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
      optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
      return loss
    loss = strategy.reduce('MEAN', strategy.run(replica, next(batches)), axis=None)
    global_step.assign_add(1)
    return {'loss': loss}

  with tfmon.train.MonitoredTrainingSession(
      strategy=strategy, hooks=[tfmon.train.StopAtStepHook(last_step=20)]) as session:
    while not session.should_stop():
      session.run(step)

before = iterators_alive()
train()
print('iterators alive after the session:', iterators_alive() - before, flush=True)
"""


@pytest.mark.slow
def test_a_closed_sessions_traces_keep_no_iterator_and_the_process_exits_at_once(tmp_path):
  script = tmp_path / 'job.py'
  script.write_text(_PROGRAM)
  start = time.monotonic()
  result = subprocess.run([sys.executable, str(script)], cwd=_ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'})
  elapsed = time.monotonic() - start
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'iterators alive after the session: 0' in result.stdout, result.stdout
  assert elapsed < 60, f'the process took {elapsed:.0f} s'
