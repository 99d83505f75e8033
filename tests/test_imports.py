"""The package's import structure: no import circles, and no import from a lower layer to a
higher one (issue 33).

Every module of electra_jax is parsed with `ast`, nothing is imported, so this is fast. Every
import of an electra_jax module counts: at module level, inside a function, and under
`if TYPE_CHECKING:` (a type-only import is still a dependency of the design). Relative imports
are resolved, and `from pkg import name` counts as an import of `pkg.name` where that is a
module, else of `pkg`. Importing `a.b.c` also runs the __init__ of `a` and `a.b`, but those
implicit imports are not edges here: a package's __init__ that re-exports its submodules would
otherwise close a circle with every submodule importing a sibling. Modules imported by a name
computed at run time (`importlib.import_module`: benchmark/__init__.py's lazy names) are not
seen; keep such imports within one part of the package.
"""

import ast
import collections
import os
from typing import NamedTuple

from tests import testing

PACKAGE = "electra_jax"
ROOT = os.path.join(testing.REPO, PACKAGE)

# The layers, lowest first. A module may import a module of its own unit (top-level module or
# subpackage of electra_jax), or of a unit in a lower layer. Units that share a layer are peers
# that must not import each other, except in "foundation", whose modules are the plumbing that
# everything uses and may import each other (still without circles). "__init__" is the
# package's own __init__.py (imported before any of its modules).
LAYERS = (
    ("foundation", ("__init__", "errors", "fileio", "logs", "platform", "interrupt",
                    "config_doc", "cli", "workdirs")),
    ("models, data", ("models", "data")),
    ("training", ("training",)),
    ("pretrain", ("pretrain",)),
    ("finetune, convert", ("finetune", "convert")),
    ("score, embed", ("score", "embed")),
    ("experiments, benchmark", ("experiments", "benchmark")),
    ("launch", ("launch",)),
    ("main", ("main",)),
)
SHARED_LAYERS = ("foundation",)

LAYER_OF = {unit: (rank, name) for rank, (name, units) in enumerate(LAYERS) for unit in units}


class Import(NamedTuple):
  importer: str  # Dotted module names, e.g. electra_jax.models.encoder.
  imported: str
  line: int

  def where(self) -> str:
    return f"{_path(self.importer)}:{self.line}"


def _module_files() -> dict[str, str]:
  """{dotted module name: file path} for every module of the package."""
  modules = {}
  for directory, subdirs, files in os.walk(ROOT):
    subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
    for file in files:
      if not file.endswith(".py"):
        continue
      parts = os.path.relpath(os.path.join(directory, file[:-3]), testing.REPO).split(os.sep)
      if parts[-1] == "__init__":
        parts.pop()
      modules[".".join(parts)] = os.path.join(directory, file)
  return modules


MODULES = _module_files()


def _path(module: str) -> str:
  return os.path.relpath(MODULES[module], testing.REPO)


def _is_package(module: str) -> bool:
  return MODULES[module].endswith("__init__.py")


def _resolve(importer: str, node: ast.ImportFrom) -> str:
  """The absolute name of the module `node` (a `from X import ...`) imports from."""
  if not node.level:
    return node.module or ""
  package = importer if _is_package(importer) else importer.rpartition(".")[0]
  for _ in range(node.level - 1):
    package = package.rpartition(".")[0]
  return f"{package}.{node.module}" if node.module else package


def _owner(name: str) -> str | None:
  """The package module `name` (a module, or a name inside one) lives in, if it is ours."""
  while name and name not in MODULES:
    name = name.rpartition(".")[0]
  return name or None


def _imports() -> list[Import]:
  found = []
  for module, path in MODULES.items():
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), filename=path)
    for node in ast.walk(tree):
      targets = []
      if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom):
        base = _resolve(module, node)
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                   for alias in node.names]
      for target in targets:
        if target == PACKAGE or target.startswith(PACKAGE + "."):
          owner = _owner(target)
          assert owner is not None, f"{_path(module)}:{node.lineno} imports {target}, " \
                                    "which is no module of the package"
          if owner != module:
            found.append(Import(module, owner, node.lineno))
  return found


IMPORTS = _imports()


def _unit(module: str) -> str:
  """The top-level module or subpackage of electra_jax that `module` belongs to."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else "__init__"


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan), each sorted."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for succ in sorted(edges.get(node, ())):
      if succ not in index:
        visit(succ)
        low[node] = min(low[node], low[succ])
      elif succ in on_stack:
        low[node] = min(low[node], index[succ])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(MODULES):
    if node not in index:
      visit(node)
  return sorted(found)


def _shortest_cycle(start: str, members: set[str], edges: dict[str, set[str]]) -> list[str]:
  """A shortest import path from `start` back to itself inside one component."""
  previous, queue = {start: None}, collections.deque([start])
  while queue:
    node = queue.popleft()
    for succ in sorted(edges[node] & members):
      if succ == start:
        path = []
        while node is not None:
          path.append(node)
          node = previous[node]
        return path[::-1] + [start]
      if succ not in previous:
        previous[succ] = node
        queue.append(succ)
  raise AssertionError(f"no cycle through {start}")


def test_the_import_scan_finds_the_package_and_its_imports():
  """A guard for the scan itself: it sees the package's modules, relative and `from pkg import
  module` imports, and function-level imports."""
  assert f"{PACKAGE}.cli" in MODULES and f"{PACKAGE}.models.encoder" in MODULES
  pairs = {(i.importer, i.imported) for i in IMPORTS}
  assert len(pairs) > 100
  # `from electra_jax import errors` is an import of the module electra_jax.errors.
  assert (f"{PACKAGE}.cli", f"{PACKAGE}.errors") in pairs
  # A `from electra_jax.<pkg> import <module>` inside a function: pretrain's loop ...
  assert any(a.startswith(f"{PACKAGE}.main") and b.startswith(f"{PACKAGE}.pretrain")
             for a, b in pairs)


def test_relative_imports_resolve_against_the_importers_package():
  def resolve(importer, source):
    return _resolve(importer, ast.parse(source).body[0])
  assert resolve(f"{PACKAGE}.score.energy", "from .loader import x") == f"{PACKAGE}.score.loader"
  assert resolve(f"{PACKAGE}.score", "from . import loader") == f"{PACKAGE}.score"
  assert resolve(f"{PACKAGE}.score.energy", "from .. import cli") == PACKAGE
  assert resolve(f"{PACKAGE}.score.energy", "from electra_jax.models import encoder") == \
      f"{PACKAGE}.models"


def test_no_import_circles():
  edges = collections.defaultdict(set)
  lines = collections.defaultdict(list)
  for imp in IMPORTS:
    edges[imp.importer].add(imp.imported)
    lines[imp.importer, imp.imported].append(imp.where())
  reports = []
  for component in _circles(edges):
    members = set(component)
    cycle = _shortest_cycle(component[0], members, edges)
    inside = [f"    {a} -> {b} ({', '.join(lines[a, b])})"
              for a in component for b in sorted(edges[a] & members)]
    reports.append(f"circle {' -> '.join(cycle)}\n  modules: {component}\n  imports inside it:\n"
                   + "\n".join(inside))
  assert not reports, (f"{len(reports)} import circle(s) (module level, function level and "
                       "TYPE_CHECKING imports all count):\n" + "\n".join(reports))


def test_the_layer_table_places_every_part_of_the_package():
  units = {_unit(module) for module in MODULES}
  unplaced = sorted(units - set(LAYER_OF))
  assert not unplaced, (f"top-level modules/subpackages of {PACKAGE} missing from LAYERS in "
                        f"tests/test_imports.py: {unplaced}; put each in the layer it belongs to")
  gone = sorted(set(LAYER_OF) - units)
  assert not gone, f"LAYERS in tests/test_imports.py names parts that do not exist: {gone}"


def test_imports_go_to_the_same_part_or_a_lower_layer():
  violations = []
  for imp in sorted(IMPORTS):
    a, b = _unit(imp.importer), _unit(imp.imported)
    if a == b or a not in LAYER_OF or b not in LAYER_OF:
      continue  # Unplaced parts are the other test's failure.
    (rank_a, layer_a), (rank_b, layer_b) = LAYER_OF[a], LAYER_OF[b]
    if rank_a > rank_b or (rank_a == rank_b and layer_a in SHARED_LAYERS):
      continue
    why = (f"layer {layer_b!r} above layer {layer_a!r}" if rank_a < rank_b else
           f"peers in layer {layer_a!r}, which must not import each other")
    violations.append(f"  {imp.importer} -> {imp.imported} ({why}; at {imp.where()})")
  assert not violations, (
      f"{len(violations)} import(s) from a lower layer to a higher one (layers, lowest first: "
      + " < ".join(name for name, _ in LAYERS) + "):\n" + "\n".join(violations)
      + "\nMove what the lower module needs down, or the code that needs the higher module up.")


# --------------------------------------------------------------------------------------------
# Fine-tuning families (issue 42): the subpackages of finetune that implement its `Task` import
# the core (finetune's own modules) and finetune.shared, never each other; the core imports no
# family, except the registry.

FINETUNE = f"{PACKAGE}.finetune"
FAMILY_REGISTRY = f"{FINETUNE}.families"
# The core modules that may import a family: the registry alone.
FAMILY_IMPORTERS = (FAMILY_REGISTRY,)
# The imports between families that are allowed, (importer family, imported module): none
# (what two families share lives in finetune/shared/: the retrieval rows and metrics too).
FAMILY_EDGES: set[tuple[str, str]] = set()


def _implements_task(path: str) -> bool:
  """Whether the module at `path` defines a subclass of `Task` (`Task` or `x.Task`)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), filename=path)
  for node in ast.walk(tree):
    if isinstance(node, ast.ClassDef):
      for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name == "Task":
          return True
  return False


def _families(modules: dict[str, str]) -> set[str]:
  """The family packages: subpackages of finetune holding a module that implements `Task`."""
  found = set()
  for module, path in modules.items():
    parts = module.split(".")
    if len(parts) > 3 and module.startswith(FINETUNE + ".") and _implements_task(path):
      found.add(".".join(parts[:3]))
  return found


def _family_of(module: str, families: set[str]) -> str | None:
  return next((f for f in families if module == f or module.startswith(f + ".")), None)


def family_violations(imports, families: set[str]) -> list[str]:
  """Each import from one family into another, and each import of a family by a core or
  shared module of finetune other than `FAMILY_IMPORTERS`."""
  violations = []
  for imp in sorted(imports):
    if not imp.importer.startswith(FINETUNE + ".") and imp.importer != FINETUNE:
      continue
    source, target = _family_of(imp.importer, families), _family_of(imp.imported, families)
    if target is None or source == target or (source, imp.imported) in FAMILY_EDGES:
      continue
    if source is not None:
      violations.append(f"  {imp.importer} -> {imp.imported} (family {source} imports family "
                        f"{target}; at {imp.where()})")
    elif imp.importer not in FAMILY_IMPORTERS:
      violations.append(f"  {imp.importer} -> {imp.imported} (the core imports family {target};"
                        f" only {FAMILY_REGISTRY} may; at {imp.where()})")
  return violations


FAMILIES = _families(MODULES)


def test_the_family_scan_finds_every_family():
  assert FAMILIES == {f"{FINETUNE}.{name}"
                      for name in ("glue", "qa", "classify", "tagging", "embed", "rerank")}
  assert f"{FINETUNE}.shared" not in FAMILIES


def test_fine_tuning_families_import_only_the_core_and_shared_helpers():
  violations = family_violations(IMPORTS, FAMILIES)
  assert not violations, (
      f"{len(violations)} import(s) between fine-tuning families (or from the core into one):\n"
      + "\n".join(violations) + "\nMove what two families share into finetune/shared/ (or "
      "the core), and reach a family through finetune.families.")


class _FakeImport(Import):
  def where(self) -> str:
    return f"{self.importer}:{self.line}"


def test_the_family_rule_fires_on_a_sibling_import_and_on_the_core():
  fake = [
      _FakeImport(f"{FINETUNE}.tagging.windows", f"{FINETUNE}.qa.data", 3),  # Sibling.
      _FakeImport(f"{FINETUNE}.driver", f"{FINETUNE}.glue.task", 4),  # Core -> family.
      _FakeImport(f"{FINETUNE}.tagging.task", f"{FINETUNE}.shared.windows", 5),  # Allowed.
      _FakeImport(f"{FINETUNE}.qa.task", f"{FINETUNE}.seed", 6),  # Allowed.
      _FakeImport(FAMILY_REGISTRY, f"{FINETUNE}.qa.task", 7),  # The registry: allowed.
      _FakeImport(f"{FINETUNE}.glue.task", f"{FINETUNE}.glue.data", 8),  # Its own: allowed.
      _FakeImport(f"{PACKAGE}.experiments.runner", f"{FINETUNE}.glue.task", 9),  # Not finetune.
  ]
  violations = family_violations(fake, FAMILIES)
  assert len(violations) == 2, violations
  assert any("tagging.windows -> electra_jax.finetune.qa.data (family" in v for v in violations)
  assert any("driver -> electra_jax.finetune.glue.task (the core imports" in v
             for v in violations)
