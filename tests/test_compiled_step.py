"""A train step compiled ahead of time, saved, and loaded by a run instead of compiling
(`train.compiled_step`; `python -m electra_jax.benchmark --topology=... --save_compiled`)."""

import jax
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop as train
from electra_jax.pretrain import objectives
from electra_jax.training import compilation_cache
from electra_jax.training import compiled_step
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import parallel
from tests import testing

# electra-jax's sentencepiece models reserve these ids (README); the test tokenizer is one.
SPECIAL = objectives.SpecialIds(pad=0, cls=2, sep=3, mask=4)


def _save_cpu_step(config, path):
  """Compiles `config`'s pretraining step for this process's devices and saves it."""
  setup = train.build_setup(config, SPECIAL)
  trainer = setup.trainer
  b, t = config.train.batch_size, config.data.max_seq_length
  batch = {k: jax.ShapeDtypeStruct((b, t), np.int32, sharding=trainer.batch_shardings[k])
           for k in train.INPUT_KEYS}
  with parallel.activate(trainer.mesh, trainer.rules), compilation_cache.uncached():
    compiled = trainer.train_jit.lower(trainer.abstract_state(), batch).compile()
  return compiled_step.save(str(path), compiled, config, trainer.mesh, SPECIAL), trainer.mesh


def _losses(workdir):
  return [r["train/loss"] for r in metrics_lib.read_metrics(workdir) if "train/loss" in r]


def test_a_run_with_a_saved_step_trains_exactly_as_one_that_compiles(tmp_path, monkeypatch,
                                                                      corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.train.stop_at_step = 4  # fast_config's schedule: pretrained_fast's compiled step.
  config.train.eval_every_steps = 0
  path = tmp_path / "step.compiled"
  size, mesh = _save_cpu_step(config, path)
  assert size > 1000
  compiled_config = config.copy_and_resolve_references()
  compiled_config.train.compiled_step = str(path)
  train.train_and_evaluate(config, str(tmp_path / "compiles"))
  loaded = []
  real_load = compiled_step.load

  def spy(*args):
    loaded.append(real_load(*args))
    return loaded[-1]

  monkeypatch.setattr(compiled_step, "load", spy)
  train.train_and_evaluate(compiled_config, str(tmp_path / "loads"))
  monkeypatch.undo()
  assert len(loaded) == 1  # The run took its step from the file.
  compiled_losses = _losses(str(tmp_path / "loads"))
  assert len(compiled_losses) == 4
  assert compiled_losses == _losses(str(tmp_path / "compiles"))

  # Anything the step depends on that differs is refused in one line naming it.
  other = config.copy_and_resolve_references()
  other.train.batch_size = 16
  with pytest.raises(ElectraError, match=r"train.batch_size 8 \(file\) vs 16 \(this run\)"):
    compiled_step.load(str(path), other, mesh, SPECIAL)
  with pytest.raises(ElectraError, match=r"special_ids"):
    compiled_step.load(str(path), config, mesh, objectives.SpecialIds(0, 101, 102, 103))
  # ... and what it does not depend on is not.
  logging_only = config.copy_and_resolve_references()
  logging_only.train.log_every_steps = 7
  logging_only.data.train_files = "elsewhere/*.txt"
  assert compiled_step.load(str(path), logging_only, mesh, SPECIAL) is not None


def test_missing_and_corrupt_files_are_one_line_errors(tmp_path):
  config = testing.fast_config()
  config.train.compiled_step = str(tmp_path / "absent")
  with pytest.raises(ElectraError, match="no such file"):
    train.train_and_evaluate(config, str(tmp_path / "run"))  # Before any data work.
  assert not (tmp_path / "run" / "checkpoints").exists()
  corrupt = tmp_path / "corrupt"
  corrupt.write_bytes(b"\x80\x04garbage")
  mesh = parallel.make_mesh(config.mesh)
  with pytest.raises(ElectraError, match="is not a readable compiled step"):
    compiled_step.load(str(corrupt), config, mesh, SPECIAL)
  unigram = testing.fast_config()
  unigram.objective.generator = "unigram"
  unigram.train.compiled_step = str(corrupt)
  with pytest.raises(ElectraError, match="unigram"):
    compiled_step.check_usable(unigram)


def test_a_step_compiled_after_the_cache_has_it_still_saves_whole(tmp_path):
  """The persistent compilation cache (on in the tests) hands back an executable that XLA:CPU
  serializes without its kernels; `uncached` compiles afresh, so the saved copy runs."""
  from jax.experimental import serialize_executable  # pylint: disable=import-outside-toplevel

  def f(x):
    y = jax.numpy.tanh(x.astype(jax.numpy.bfloat16)).astype(np.float32)
    return jax.lax.bitcast_convert_type(y, np.int32).sum()

  x = jax.numpy.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
  expected = int(jax.jit(f)(x))  # Compiled, and written to the cache.
  jax.clear_caches()  # The next compile would find it on disk.
  with compilation_cache.uncached():
    compiled = jax.jit(f).lower(x).compile()
  assert jax.config.jax_enable_compilation_cache  # Restored.
  loaded = serialize_executable.deserialize_and_load(*serialize_executable.serialize(compiled))
  assert int(loaded(x)) == expected
