"""Command lines run in children forked from one warm process, for the tests that start many.

A fresh `python -m electra_jax.X ...` spends seconds importing JAX, Flax, orbax and TensorFlow
before it parses a flag; a test that checks sixty documented commands (`--show_config`,
`--help`) spends most of its time there. `Forks` starts one server process that imports the
package's libraries once (never a command's `__main__` module, whose flags a child defines),
then runs each command in a child forked from it: the child points its standard output and
error at files, runs the module as `__main__` with the command's argv (as `python -m` does),
and exits with the command's status. What a command prints, its exit status and its files are
those of a fresh process; only the imports are shared.

Use it for commands that check their flags and configs and exit; a command that trains, or
that must start cold (a test of what a fresh process prints at start-up), runs as a real
subprocess.

    proc = cli_forks.run(["electra_jax.finetune", "--config=configs/glue.py", "--show_config"])
    proc.returncode, proc.stdout, proc.stderr
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time

# Imported once by the server: the libraries every command needs (not a `__main__` module).
PRELOAD = ("jax", "flax.linen", "optax", "orbax.checkpoint", "ml_collections", "absl.app",
           "electra_jax.cli", "electra_jax.pretrain.loop", "electra_jax.finetune.driver",
           "electra_jax.finetune.families", "electra_jax.convert.files",
           "electra_jax.score.loader", "electra_jax.experiments.runner",
           "electra_jax.benchmark.step", "electra_jax.data.build")


class Forks:
  """A warm server process that runs `python -m MODULE ARGS` commands in forked children, one
  at a time per server (`run` is thread-safe: callers queue)."""

  def __init__(self, env: dict[str, str] | None = None, cwd: str | None = None):
    from tests import testing  # pylint: disable=import-outside-toplevel
    self._lock = threading.Lock()
    self._proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "tests.cli_forks"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
        env=env or testing.main_env(), cwd=cwd or testing.REPO)
    ready = self._proc.stdout.readline()
    if ready.strip() != "ready":
      raise RuntimeError(f"the command server did not start: {ready!r}")

  def run(self, argv: list[str], stdin: str | None = None,
          timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m argv[0] argv[1:]` in a child of the server, reading `stdin` (text) as its
    standard input (none: an empty one): its status and output.

    Raises:
      subprocess.TimeoutExpired: the command ran over `timeout` seconds (it was killed).
    """
    with self._lock:
      self._proc.stdin.write(json.dumps({"argv": argv, "stdin": stdin or "",
                                         "timeout": timeout}) + "\n")
      self._proc.stdin.flush()
      reply = json.loads(self._proc.stdout.readline())
    if reply.get("timed_out"):
      raise subprocess.TimeoutExpired([sys.executable, "-m", *argv], timeout, reply["stdout"],
                                      reply["stderr"])
    return subprocess.CompletedProcess([sys.executable, "-m", *argv], reply["returncode"],
                                       reply["stdout"], reply["stderr"])

  def close(self) -> None:
    if self._proc.poll() is None:
      self._proc.stdin.close()
      self._proc.wait(timeout=60)

  def __enter__(self) -> "Forks":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


_SHARED: list[Forks] = []  # This process's server (`shared`).


def shared() -> Forks:
  """This process's command server, started on first use and closed when the process exits
  (the `forks` fixture, and the tests' command helpers, use it)."""
  if not _SHARED:
    _SHARED.append(Forks())
    atexit.register(_SHARED[0].close)
  return _SHARED[0]


def run(argv: list[str], stdin: str | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess:
  """`python -m argv...` in a child of this process's server (`shared`)."""
  return shared().run(argv, stdin=stdin, timeout=timeout)


def _child(argv: list[str], in_path: str, out_path: str, err_path: str) -> None:
  """In the forked child: input and output from and to the files, run the module as
  `python -m` would, exit with its status."""
  code = 0
  try:
    with open(out_path, "wb") as out, open(err_path, "wb") as err, \
        open(in_path, "rb") as given:
      os.dup2(given.fileno(), 0)
      os.dup2(out.fileno(), 1)
      os.dup2(err.fileno(), 2)
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if e.code is not None and not isinstance(e.code, int):
      print(e.code, file=sys.stderr)
  except BaseException:  # pylint: disable=broad-except
    import traceback  # pylint: disable=import-outside-toplevel
    traceback.print_exc()
    code = 1
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
  """(exit status, whether it was killed for running over `timeout` seconds) of child PID."""
  deadline = time.monotonic() + timeout
  while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
      return os.waitstatus_to_exitcode(status), False
    if time.monotonic() > deadline:
      os.kill(pid, signal.SIGKILL)
      _, status = os.waitpid(pid, 0)
      return os.waitstatus_to_exitcode(status), True
    time.sleep(0.01)


def _serve() -> None:
  """The server: preload, say "ready", then one forked child per request line."""
  import importlib  # pylint: disable=import-outside-toplevel
  for name in PRELOAD:
    importlib.import_module(name)
  from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
  if xla_bridge._backends:  # pylint: disable=protected-access
    # A child would inherit a device client whose threads did not survive the fork.
    raise RuntimeError("importing the libraries started a JAX backend; the server must not")
  protocol = sys.stdout
  print("ready", file=protocol, flush=True)
  for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryDirectory() as scratch:
      in_path, out_path, err_path = (os.path.join(scratch, n) for n in ("in", "out", "err"))
      with open(in_path, "w", encoding="utf-8") as f:
        f.write(request["stdin"])
      for path in (out_path, err_path):  # There even when the child is killed before it opens them.
        open(path, "wb").close()  # pylint: disable=consider-using-with
      pid = os.fork()
      if pid == 0:
        _child(request["argv"], in_path, out_path, err_path)
      code, timed_out = _wait(pid, request["timeout"])
      read = lambda path: open(path, encoding="utf-8", errors="replace").read()  # pylint: disable=unspecified-encoding
      reply = {"returncode": code, "stdout": read(out_path), "stderr": read(err_path),
               "timed_out": timed_out}
    print(json.dumps(reply), file=protocol, flush=True)


if __name__ == "__main__":
  _serve()
