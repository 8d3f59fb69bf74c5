"""The README's code runs as written, and the README stays a day-one page.

Which blocks run: every ```python block of README.md and docs/*.md runs as is,
in a fresh process, in a directory of its own, three times (a user reruns a
training script: it must resume, and a finished job must end quietly), unless
its first line starts with one of these comments, which say on the page why it
does not run on its own:

  # Fragment: ...   code that needs names the page does not define (your model,
                    your dataset), shown to be read;
  # Before ...      a before/after comparison (the TF1 side needs TF1's code).

A block runs through `exec` in a fresh namespace, followed by `gc.collect()`, so
that what TensorFlow logs when objects are freed (values of a checkpoint left
unrestored) shows as it would in a longer program. Keep runnable blocks small:
a few steps of a small model.
"""

import glob
import os
import re
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_README = os.path.join(_ROOT, 'README.md')
_NOT_RUN = ('# Fragment', '# Before')

# The first lines of the README, exactly: the commands a newcomer pastes.
_COMMANDS = """\
# tfmon

```sh
pip install -e . && python -m tfmon.examples.cifar10           # install, run the main job
pip install -e '.[test]' && python -m pytest -q tests          # install, run the tests
```
"""

_RUNNER = """\
import gc, sys
exec(compile(sys.argv[1], sys.argv[2], 'exec'), {'__name__': '__main__'})
gc.collect()
"""


def _blocks(path):
  """(name, source) of each ```python block of `path`, name as `file:line`."""
  blocks, source, start = [], None, None
  with open(path, encoding='utf-8') as f:
    for number, line in enumerate(f, 1):
      if source is None and line.rstrip() == '```python':
        source, start = [], number + 1
      elif source is not None and line.rstrip() == '```':
        blocks.append((f'{os.path.relpath(path, _ROOT)}:{start}', ''.join(source)))
        source = None
      elif source is not None:
        source.append(line)
  return blocks


def _runnable(path):
  return [(name, source) for name, source in _blocks(path)
          if not source.lstrip().startswith(_NOT_RUN)]


_PAGES = [_README] + sorted(glob.glob(os.path.join(_ROOT, 'docs', '*.md')))
_RUNNABLE = [block for page in _PAGES for block in _runnable(page)]


def _run(block, directory):
  name, source = block
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
             PYTHONPATH=os.pathsep.join([_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
  return subprocess.run([sys.executable, '-c', _RUNNER, source, name], cwd=directory,
                        env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """`runs(block)`: the block's three runs in one directory, made once per module."""
  done = {}

  def run(block):
    if block not in done:
      directory = tmp_path_factory.mktemp('block')
      done[block] = [_run(block, directory) for _ in range(3)]
    return done[block]
  return run


def test_readme_opens_with_the_two_commands_unchanged():
  with open(_README, encoding='utf-8') as f:
    assert f.read().startswith(_COMMANDS)


def test_readme_is_a_day_one_page_linking_the_rest():
  with open(_README, encoding='utf-8') as f:
    text = f.read()
  size = len(text.encode('utf-8'))
  assert size <= 12 * 1024, f'README.md is {size} bytes: move what day one does not need to docs/'
  links = re.findall(r'\]\((docs/[^)#]+)', text)
  for page in ['porting', 'hooks', 'distribution', 'reliability', 'known-differences']:
    assert f'docs/{page}.md' in links
  for page in _PAGES[1:]:  # every link from a docs page to another page resolves
    with open(page, encoding='utf-8') as f:
      links += [os.path.join('docs', link)
                for link in re.findall(r'\]\(([\w.-]+\.md)', f.read())]
  for link in links:
    assert os.path.exists(os.path.join(_ROOT, os.path.normpath(link))), link


def test_the_readme_has_a_block_that_runs():
  assert _runnable(_README), 'the quickstart is a runnable block'


@pytest.mark.slow
@pytest.mark.parametrize('block', _RUNNABLE, ids=[name for name, _ in _RUNNABLE])
def test_runnable_blocks_run_as_is_and_again(block, runs):
  for result in runs(block):
    assert result.returncode == 0, result.stderr
    assert 'unrestored values' not in result.stdout + result.stderr, result.stderr


def _normalized(line):
  """A log line without what changes from run to run: numbers with a decimal
  point (losses, rates, seconds) and the directory the block ran in."""
  line = re.sub(r'\d+\.\d+', 'X', line)
  return re.sub(r'\S*/(train/)', r'\1', line)


def test_quickstart_counts_only_steps_that_got_a_batch_resumes_and_stops(runs):
  first, again, finished = runs(_runnable(_README)[0])
  # 20 batches: the data runs out after step 20, and the step that found no
  # batch does not count.
  assert 'Saving checkpoints for 20 into' in first.stderr, first.stderr
  assert 'Saving checkpoints for 21' not in first.stderr, first.stderr
  # checkpoint_dir='train' is logged as given, as TF1 logged it.
  assert 'Restoring parameters from train/model.ckpt-20\n' in again.stderr, again.stderr
  assert 'Saving checkpoints for 30 into' in again.stderr, again.stderr
  assert 'Global step 30 has already reached last_step 30' in finished.stderr
  assert 'Saving checkpoints' not in finished.stderr, finished.stderr


def test_quickstart_output_shown_is_what_it_prints(runs):
  """The README's "What you see" lines appear, in order, in the first run's log."""
  first = runs(_runnable(_README)[0])[0]
  with open(_README, encoding='utf-8') as f:
    shown = re.search(r'What you see[^\n]*\n\n```\n(.*?)```', f.read(), re.S).group(1)
  printed = [_normalized(line) for line in first.stderr.splitlines()]
  position = 0
  for line in shown.splitlines():
    if line == '...':
      continue
    assert _normalized(line) in printed[position:], (line, first.stderr)
    position = printed.index(_normalized(line), position) + 1
