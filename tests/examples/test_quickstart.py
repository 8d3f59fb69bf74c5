"""The quickstart example trains, logs on schedule and stops at max_steps."""

import subprocess
import sys

import tfmon
from tfmon.examples import quickstart


def test_quickstart_trains_and_logs_every_n_steps():
  logger = quickstart.train(max_steps=60, log_every=20)
  assert [step for step, _, _ in logger.logged] == [20, 40, 60]
  first_loss, last_loss = logger.logged[0][1], logger.logged[-1][1]
  assert last_loss < first_loss
  assert int(tfmon.train.get_global_step().numpy()) == 60


def test_quickstart_runs_as_a_module():
  result = subprocess.run(
      [sys.executable, '-m', 'tfmon.examples.quickstart', '--max_steps=30',
       '--log_every=10'], capture_output=True, text=True, timeout=120, check=True)
  assert 'step 30, loss = ' in result.stderr
  assert 'Done: global step 30.' in result.stderr
