"""The documented install (`pip install -e .`) brings every package the commands import."""

import ast
import importlib.metadata
import pathlib
import re
import sys

from tests import testing

# Imported only by optional features that say what to install when missing: the PyTorch
# comparisons and checkpoints (--compare=hf, pytorch_model.bin), the TPU runtime, datasets by
# name (hf:NAME, the [hf] extra), the Beam build (--runner=beam, the [beam] extra) and the
# embed step's comparison (benchmark --compare=sentence-transformers).
OPTIONAL = {"torch", "transformers", "libtpu", "datasets", "apache_beam", "sentence_transformers"}


def _requirement_names(setup_text: str, key: str) -> set[str]:
  block = re.search(key + r"=\[(.*?)\]", setup_text, re.S).group(1)
  names = re.findall(r'"([A-Za-z0-9_.\-]+)', block)
  return {re.split(r"[<>=\[]", n)[0].lower().replace("_", "-") for n in names}


def test_every_imported_package_is_an_install_requirement():
  root = pathlib.Path(testing.REPO)
  required = _requirement_names((root / "setup.py").read_text(), "install_requires")
  distributions = importlib.metadata.packages_distributions()
  missing = {}
  for path in sorted((root / "electra_jax").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        modules = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        modules = [node.module]
      else:
        continue
      for module in modules:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "electra_jax" or top in OPTIONAL:
          continue
        dists = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
        # tensorflow is installed as tensorflow-cpu.
        if not dists & required and not (top == "tensorflow" and "tensorflow-cpu" in required):
          missing.setdefault(top, str(path.relative_to(root)))
  assert not missing, f"imported but not in install_requires: {missing}"
  assert "safetensors" in required  # convert to-hf writes model.safetensors.


def test_ci_runs_the_readmes_test_commands_both_tiers():
  """.ci/run installs what the README's test command installs and runs both tiers the README
  names: the default (fast) run and `-m full`."""
  root = pathlib.Path(testing.REPO)
  readme = (root / "README.md").read_text()
  ci = (root / ".ci" / "run").read_text()
  install = re.search(r"pip install -e '(\.\[[a-z,]+\])' && python -m pytest -q\n", readme)
  assert install, ("the README's test command is no longer "
                   "`pip install -e '.[...]' && python -m pytest -q`")
  assert f"pip install --quiet -e '{install.group(1)}'" in ci
  assert "`python -m pytest -q -m full`" in readme
  commands = [line.strip() for line in ci.splitlines() if line.startswith("python -m pytest")]
  assert commands == ["python -m pytest -q", "python -m pytest -q -m full"], commands
  ini = (root / "pytest.ini").read_text()
  assert '-m "not full"' in ini and "\n    full:" in ini  # The default run leaves the full tier out.
