"""The offline build on Apache Beam (issue 45): `data.build --runner=beam` writes the local
build's shards, counts and manifest byte for byte (Beam's DirectRunner in two processes), and
its errors are one line."""

import os

import pytest

from electra_jax.data import build as build_lib
from electra_jax.errors import ElectraError

# .ci/run runs this file in an environment of its own with the [beam] extra (Beam pins protobuf
# < 7, which the test extra's transformers cannot load) and sets ELECTRA_JAX_REQUIRE_BEAM=1 there,
# so that a broken install fails instead of skipping.
if os.environ.get("ELECTRA_JAX_REQUIRE_BEAM"):
  import apache_beam as beam  # pylint: disable=unused-import
else:
  beam = pytest.importorskip("apache_beam")


def _files(directory):
  out = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      out[os.path.relpath(path, directory)] = open(path, "rb").read()
  return out


@pytest.mark.parametrize("packing", [False, True])
def test_the_beam_build_is_the_local_build(corpus_and_tokenizer, tmp_path, packing):
  files, model = corpus_and_tokenizer
  kwargs = dict(num_shards=3, tokenizer_model=model, input_patterns=files, processes=2,
                max_seq_length=32, eval_fraction=0.1, seed=5, progress=False, packing=packing)
  local = build_lib.build(output=str(tmp_path / "local"), **kwargs)
  beam_manifest = build_lib.build(output=str(tmp_path / "beam"), runner="beam", **kwargs)
  assert beam_manifest == local
  want, got = _files(tmp_path / "local"), _files(tmp_path / "beam")
  assert sorted(got) == sorted(want) and len(want) >= 8  # 3+3 shards, counts, manifest, ...
  for name in want:
    assert got[name] == want[name], name


def test_beam_options_need_the_beam_runner(corpus_and_tokenizer, tmp_path):
  files, model = corpus_and_tokenizer
  with pytest.raises(ElectraError, match="are Beam's; they need --runner=beam"):
    build_lib.build(output=str(tmp_path / "x"), num_shards=1, tokenizer_model=model,
                    input_patterns=files, beam_args=["--runner=DirectRunner"])
  with pytest.raises(ElectraError, match="--runner='spark'; choose one of local, beam"):
    build_lib.build(output=str(tmp_path / "x"), num_shards=1, tokenizer_model=model,
                    input_patterns=files, runner="spark")


def test_a_failed_pipeline_leaves_no_manifest(corpus_and_tokenizer, tmp_path, monkeypatch):
  from electra_jax.data import build_beam  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer

  def broken(shard, spec, job):
    raise RuntimeError(f"shard {shard} broke")
  monkeypatch.setattr(build_beam, "run_shard", broken)
  with pytest.raises(ElectraError, match="the Beam pipeline failed .*shard 0 broke|the Beam "
                     "pipeline failed"):
    build_lib.build(output=str(tmp_path / "out"), num_shards=1, tokenizer_model=model,
                    input_patterns=files, runner="beam", progress=False,
                    beam_args=["--runner=DirectRunner"])
  assert not os.path.exists(tmp_path / "out" / "manifest.json")


def test_a_two_frame_jsonl_zst_builds_the_single_frame_files_shards(corpus_and_tokenizer,
                                                                    tmp_path):
  """Issue 57: a .jsonl.zst of two zstd frames (cat a.zst b.zst, pzstd) is read whole on the
  Beam workers too: the shards of the single-frame file's local build, byte for byte."""
  import json  # pylint: disable=import-outside-toplevel
  import zstandard  # pylint: disable=import-outside-toplevel
  from electra_jax.data import text_files  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  documents = text_files.read_documents(files.split(",")[0])[:40]
  lines = [(json.dumps({"text": "\n".join(d)}) + "\n").encode() for d in documents]
  compress = zstandard.ZstdCompressor().compress
  one, two = tmp_path / "one.jsonl.zst", tmp_path / "two.jsonl.zst"
  one.write_bytes(compress(b"".join(lines)))
  two.write_bytes(compress(b"".join(lines[:20])) + compress(b"".join(lines[20:])))
  kwargs = dict(num_shards=1, tokenizer_model=model, max_seq_length=32, eval_fraction=0.1,
                progress=False)
  local = build_lib.build(output=str(tmp_path / "local"), input_patterns=str(one), processes=1,
                          **kwargs)
  beam_manifest = build_lib.build(output=str(tmp_path / "beam"), input_patterns=str(two),
                                  runner="beam", beam_args=["--runner=DirectRunner"], **kwargs)
  assert beam_manifest.splits == local.splits and local.examples("train") > 0
  assert sum(info.documents for info in local.splits["train"] + local.splits["eval"]) >= 40
  for split in local.splits:
    name = local.splits[split][0].file
    assert (tmp_path / "beam" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
