"""The warm command server (tests/cli_forks.py): a forked command gives what a fresh
`python -m` gives, and one that runs over its timeout is killed without stopping the server."""

import subprocess
import sys

import pytest

from tests import cli_forks
from tests import testing

# A config error that --show_config reports on stderr with exit status 1, and a help text.
COMMANDS = [["electra_jax.finetune", "--config=configs/tag.py", "--config.task_family=tagging",
             "--config.init_checkpoint=runs/small", "--show_config"],
            ["electra_jax.convert", "to-hf", "--help"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=["config_error", "help"])
def test_a_forked_command_prints_and_exits_as_a_fresh_process(argv):
  forked = cli_forks.run(argv)
  fresh = subprocess.run([sys.executable, "-m", *argv], cwd=testing.REPO,
                         env=testing.main_env(), capture_output=True, text=True, timeout=300,
                         check=False)
  assert (forked.returncode, forked.stdout, forked.stderr) == (
      fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_command_over_its_timeout_is_killed_and_the_server_goes_on():
  with pytest.raises(subprocess.TimeoutExpired):
    cli_forks.run(COMMANDS[1], timeout=0)
  assert cli_forks.run(COMMANDS[1]).returncode == 0
