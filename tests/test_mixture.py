"""Weighted mixtures of pretraining sources (issue 45): the setting's syntax and errors, the
row schedule (exact shares per round, a closed form for any position), resumable batches from
in-memory and shard sources, its cache read once per call (issue 57), a shard source packed
otherwise than the config, and a run that reports each source's share and refuses other
weights on resume."""

import json

import numpy as np
import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import mixture
from electra_jax.data import pipeline
from electra_jax.errors import ElectraError
from tests import testing


def test_the_setting_names_weights_and_sources():
  parsed = mixture.parse("0.7:/data/books/*.parquet|/more/*.txt, 0.2:shards:gs://b/wiki,"
                         "1:tfds:c4/en@validation,0.5:hf:org/name:cfg@train,2:/data/saved")
  assert [(c.weight, c.kind, c.target, c.split) for c in parsed] == [
      (0.7, "files", "/data/books/*.parquet|/more/*.txt", ""),
      (0.2, "shards", "gs://b/wiki", ""), (1.0, "tfds", "c4/en", "validation"),
      (0.5, "hf", "hf:org/name:cfg@train", ""), (2.0, "files", "/data/saved", "")]
  assert [c.name for c in parsed] == ["0_books", "1_wiki", "2_en", "3_name_cfg_train",
                                      "4_saved"]


@pytest.mark.parametrize("text, message", [
    ("", "is empty"),
    ("/data/*.txt", "is not WEIGHT:SOURCE"),
    ("0.5:/a/*.txt,0:/b/*.txt", "every weight must be a positive number"),
    ("0.5:/a/*.txt,-1:/b/*.txt", "every weight must be a positive number"),
    ("0.5:", "names no source"),
    ("1:shards:", "names no shards source"),
])
def test_bad_settings_are_one_line(text, message):
  with pytest.raises(ElectraError, match=message):
    mixture.parse(text)


def test_apportion_and_the_schedules_closed_form():
  assert mixture.apportion([0.7, 0.2, 0.1], 10).tolist() == [7, 2, 1]
  assert mixture.apportion([1, 1, 1], 10).tolist() == [4, 3, 3]
  schedule = mixture.Schedule([0.6, 0.3, 0.1], batch_size=8, seed=[3], round_batches=5)
  rows = schedule.rows(0, 8 * 5 * 4 + 13)
  for n in (0, 1, 39, 40, 41, 117, len(rows)):
    np.testing.assert_array_equal(schedule.counts_before(n), np.bincount(rows[:n], minlength=3))
  per_round = [np.bincount(rows[r * 40:(r + 1) * 40], minlength=3) for r in range(4)]
  assert all(c.tolist() == [24, 12, 4] for c in per_round)  # Exact shares every round.
  assert rows[:40].tolist() != rows[40:80].tolist()  # Shuffled per round.
  np.testing.assert_array_equal(schedule.rows(37, 20), rows[37:57])
  again = mixture.Schedule([0.6, 0.3, 0.1], batch_size=8, seed=[3], round_batches=5)
  np.testing.assert_array_equal(again.rows(0, len(rows)), rows)


@pytest.mark.parametrize("reads_before", [1, 2, 3])
def test_the_round_cache_is_read_once_per_call(reads_before):
  """Read-ahead threads share a schedule: another thread that caches another round between
  two reads of one call (possible on free-threaded Python), after the call's first, second or
  third read of the cache, does not change the sources the call gives."""
  plain = mixture.Schedule([0.6, 0.4], batch_size=4, seed=[1], round_batches=2)
  rounds = [plain.round_sources(r).copy() for r in (0, 1)]
  assert rounds[0].tolist() != rounds[1].tolist()

  class Raced(mixture.Schedule):
    """The cache, replaced by round 1's after the `reads_before`-th read."""

    @property
    def _cached(self):
      self.reads = getattr(self, "reads", 0) + 1
      value = self.__dict__["_slot"]
      if self.reads == reads_before:
        self.__dict__["_slot"] = (1, rounds[1])
      return value

    @_cached.setter
    def _cached(self, value):
      self.__dict__["_slot"] = value

  raced = Raced([0.6, 0.4], batch_size=4, seed=[1], round_batches=2)
  raced._cached, raced.reads = (0, rounds[0]), 0  # pylint: disable=protected-access
  np.testing.assert_array_equal(raced.round_sources(0), rounds[0])


def arrays_of(ids, length=6):
  ids = np.asarray(ids)
  return {"input_ids": np.tile(ids[:, None], (1, length)).astype(np.int32),
          "input_mask": np.ones((len(ids), length), np.int32),
          "segment_ids": np.zeros((len(ids), length), np.int32)}


def test_batches_hold_each_sources_share_and_resume_exactly():
  streams = [mixture.ArrayStream(arrays_of(np.arange(100, 150)), [0, 0], "a"),
             mixture.ArrayStream(arrays_of(np.arange(500, 530)), [0, 1], "b")]
  schedule = mixture.Schedule([3, 1], batch_size=8, seed=[0])
  iterator = mixture.MixtureLoader(mixture.MixtureBatches(streams, schedule, 8), ["a", "b"])
  batches = [next(iterator) for _ in range(250)]
  ids = np.concatenate([b["input_ids"][:, 0] for b in batches])
  from_b = ids >= 500
  assert from_b.mean() == pytest.approx(0.25, abs=0.01)
  # Each source is read in its own epochs: every example once before any twice.
  a_ids = ids[~from_b]
  assert sorted(a_ids[:50].tolist()) == list(range(100, 150))
  shares = iterator.take_shares()
  assert shares["mixture/a"] == pytest.approx(0.75, abs=0.01)
  assert iterator.take_shares() == {"mixture/a": 0.0, "mixture/b": 0.0}
  resumed = mixture.MixtureLoader(
      mixture.MixtureBatches(streams, mixture.Schedule([3, 1], 8, seed=[0]), 8), ["a", "b"],
      position=137)
  for p in range(137, 145):
    got = next(resumed)
    for key in got:
      np.testing.assert_array_equal(got[key], batches[p][key])


def test_hosts_never_share_an_in_memory_example():
  data = arrays_of(np.arange(40))
  seen = [mixture.ArrayStream(data, [1, 0], "a", h, 2).examples_at(0, 20)["input_ids"][:, 0]
          for h in (0, 1)]
  assert sorted(np.concatenate(seen).tolist()) == list(range(40))


def test_a_mixture_of_files_records_and_shards(corpus_and_tokenizer, tmp_path):
  files, model = corpus_and_tokenizer
  first, second, third = files.split(",")
  shards = str(tmp_path / "shards")
  build_lib.build(output=shards, num_shards=1, tokenizer_model=model, input_patterns=third,
                  processes=1, max_seq_length=32, eval_fraction=0.1, progress=False)
  jsonl = tmp_path / "second.jsonl"
  text = open(second, encoding="utf-8").read().split("\n\n")
  jsonl.write_text("".join(json.dumps({"body": {"text": t}}) + "\n" for t in text if t.strip()))
  config = testing.fast_config()
  d = config.data
  d.mixture = f"0.5:{first},0.3:{jsonl},0.2:shards:{shards}"
  d.text_field = "body/text"
  with pytest.raises(ElectraError, match="carry their tokenizer"):
    d.tokenizer_model = model
    pipeline.build_pretraining_data(d, str(tmp_path / "run"), 512, seed=0)
  d.tokenizer_model = ""
  data = pipeline.build_pretraining_data(d, str(tmp_path / "run"), 512, seed=0)
  assert data.train is None and len(data.eval["input_ids"]) > 0
  assert "0.2" not in data.provenance()["mixture"] and "20.0%" in data.provenance()["mixture"]
  iterator = data.train_iterator(16, seed=0)
  for _ in range(100):
    next(iterator)
  rows = iterator.mixture.schedule.counts_before(100 * 16)
  np.testing.assert_allclose(rows / rows.sum(), [0.5, 0.3, 0.2], atol=0.001)
  shares = iterator.take_shares()
  assert set(shares) == {"mixture/0_stdlib_docs_00.txt", "mixture/1_second.jsonl",
                         "mixture/2_shards"}
  assert sum(shares.values()) == pytest.approx(1.0)
  counts = data.token_counts(512)
  assert counts.sum() > 0
  # The same position gives the same batch.
  again = data.train_iterator(16, seed=0, position=99)
  replay = data.train_iterator(16, seed=0, position=0)
  for _ in range(99):
    next(replay)
  got, want = next(again), next(replay)
  for key, value in got.items():
    np.testing.assert_array_equal(value, want[key])


def test_mixture_errors_name_the_source(corpus_and_tokenizer, tmp_path):
  files, model = corpus_and_tokenizer
  config = testing.fast_config(tokenizer_model=model)
  d = config.data
  empty = tmp_path / "empty.jsonl"
  empty.write_text('{"text": ""}\n')
  d.mixture = f"1:{files.split(',')[0]},1:{empty}"
  with pytest.raises(ElectraError, match=r"source 1_empty.jsonl \(.*empty.jsonl\) gave no text; "
                     "a mixture never drops a source silently"):
    pipeline.build_pretraining_data(d, str(tmp_path / "run"), 512, seed=0)
  d.mixture = f"1:{tmp_path}/missing/*.txt"
  with pytest.raises(ElectraError, match="no files match"):
    pipeline.build_pretraining_data(d, str(tmp_path / "run"), 512, seed=0)
  d.mixture = "1:/a/*.txt"
  d.train_files = files
  with pytest.raises(ElectraError, match="names the training sources itself"):
    pipeline.build_pretraining_data(d, str(tmp_path / "run"), 512, seed=0)


def test_an_unpacked_shard_source_under_a_packing_preset_gets_both_fixes(corpus_and_tokenizer,
                                                                         tmp_path):
  """configs/modern_tiny.py packs its rows; a mixture's shards built without --packing get the
  single shard source's two fixes, naming the source."""
  files, model = corpus_and_tokenizer
  config = testing.load_config("modern_tiny")
  assert config.data.packing
  shards = str(tmp_path / "shards")
  build_lib.build(output=shards, num_shards=1, tokenizer_model=model,
                  input_patterns=files.split(",")[0], processes=1,
                  max_seq_length=config.data.max_seq_length, progress=False)
  config.data.mixture = f"1:{files.split(',')[1]},1:shards:{shards}"
  with pytest.raises(ElectraError, match=(
      r"the shards of --config.data.mixture source 1_shards \(.*shards\) hold unpacked rows "
      r"but --config.data.packing=True; set --config.data.packing=False or rebuild the "
      r"shards with --packing")):
    pipeline.build_pretraining_data(config.data, str(tmp_path / "run"),
                                    config.model.vocab_size, seed=0)


@pytest.mark.full  # Two short runs (a compile each).
def test_a_mixture_run_reports_shares_and_refuses_other_weights_on_resume(corpus_and_tokenizer,
                                                                          tmp_path):
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  from electra_jax.training import loop as loop_lib  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  first, second, _ = files.split(",")
  config = testing.fast_config(tokenizer_model=model)
  config.data.mixture = f"3:{first},1:{second}"
  config.train.num_train_steps = 2
  config.train.checkpoint_every_steps = 2
  workdir = tmp_path / "run"
  loop.train_and_evaluate(config, str(workdir))
  lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  shares = [r for r in lines if "train/mixture/0_stdlib_docs_00.txt" in r]
  assert len(shares) == 2
  line = loop_lib.Progress().line(2, 2, {"loss": 1.0, "mixture/0_books": 0.7,
                                          "mixture/1_wiki": 0.3})
  assert "mix 0_books 70% 1_wiki 30%" in line
  config.data.mixture = f"1:{first},1:{second}"
  config.train.num_train_steps = 3
  with pytest.raises(ElectraError, match="data.mixture"):
    loop.train_and_evaluate(config, str(workdir))
  loop.train_and_evaluate(config, str(workdir), allow_config_change=True)
  assert "data.mixture" in (workdir / "log.txt").read_text()


def test_a_shared_tokenizer_trains_on_every_in_memory_source(corpus_and_tokenizer, tmp_path):
  files, _ = corpus_and_tokenizer
  first, second, _ = files.split(",")
  config = testing.fast_config()
  config.data.mixture = f"1:{first},1:{second}"
  path = pipeline.prepare_tokenizer(config.data, str(tmp_path / "run"), 512, seed=0)
  assert path.endswith("spm.model") and str(tmp_path / "run") in path
  with pytest.raises(ElectraError, match="whose held-out text is several sources'"):
    pipeline.held_out_sentences(config.data, seed=0)
  config.data.mixture = "1:shards:/somewhere"
  assert pipeline.prepare_tokenizer(config.data, str(tmp_path / "run2"), 512, seed=0) == ""
