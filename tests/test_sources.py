"""The data path's layering: one `Source` interface, one module per source kind, a registry.

A kind module (files, tfds, shards, mixture) imports `base` and `in_memory`, never another
kind's module (a mixture is given its sources' readers by the registry); `PretrainingData` holds
one source and none of its methods chooses among kinds; the registries name every kind a
mixture can hold."""

import ast
import inspect
import os

import pytest

from electra_jax.data import mixture as mixture_lib
from electra_jax.data import pipeline
from electra_jax.data import sources
from electra_jax.data.sources import base

KIND_MODULES = ("files", "tfds", "shards", "mixture")
SOURCES_DIR = os.path.dirname(sources.__file__)


def _imported_modules(path):
  tree = ast.parse(open(path, encoding="utf-8").read())
  for node in ast.walk(tree):  # Imports inside functions too.
    if isinstance(node, ast.ImportFrom) and node.module:
      yield node.module
      for alias in node.names:
        yield f"{node.module}.{alias.name}"
    elif isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("kind", KIND_MODULES)
def test_a_source_module_imports_no_other_source_module(kind):
  others = {f"electra_jax.data.sources.{k}" for k in KIND_MODULES if k != kind}
  imported = set(_imported_modules(os.path.join(SOURCES_DIR, f"{kind}.py")))
  assert not imported & others, f"sources/{kind}.py imports {sorted(imported & others)}"


def test_the_layer_check_sees_an_import_inside_a_function(tmp_path):
  path = tmp_path / "kind.py"
  path.write_text("def f():\n  from electra_jax.data.sources import shards\n")
  assert "electra_jax.data.sources.shards" in set(_imported_modules(str(path)))


def test_no_method_of_pretraining_data_branches_on_the_kind():
  tree = ast.parse(inspect.getsource(pipeline.PretrainingData))
  branches = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp, ast.Match))]
  assert not branches
  assert "isinstance" not in inspect.getsource(pipeline.PretrainingData)


def test_every_kind_is_registered_and_implements_the_interface():
  assert set(sources.PARTS) == set(mixture_lib.KINDS)
  assert set(sources.KINDS) == set(pipeline.SOURCES) == {"text", "tfds", "shards"}
  classes = [sources.in_memory.InMemorySource, sources.files.StreamedSource,
             sources.shards.ShardSource, sources.mixture.MixtureSource]
  for cls in classes:
    assert issubclass(cls, base.Source) and not inspect.isabstract(cls), cls
  # The interface's abstract methods: a kind that forgets one cannot be made.
  assert base.Source.__abstractmethods__ == {"batches", "examples", "token_counts"}


def test_architecture_doc_lists_what_a_source_supplies():
  text = open(os.path.join(os.path.dirname(__file__), "..", "docs", "architecture.md"),
              encoding="utf-8").read()
  section = text[text.index("### Pretraining sources"):]
  for name in ("`tokenizer`", "`eval`", "`batches", "`iterator", "`examples", "`token_counts",
               "`provenance", "one module and one registry line"):
    assert name in section, name
