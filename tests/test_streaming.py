"""Streaming text and record files on Grain (data.streaming): the pieces, the documents they
give, exact resumption from a stream state per format (plain text, .jsonl.gz, Parquet) with and
without worker processes, a training run stopped by SIGTERM and resumed, and the errors."""

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from electra_jax.data import mixture as mixture_lib
from electra_jax.data import pipeline
from electra_jax.data import recipe
from electra_jax.data import streaming
from electra_jax.data import text_files
from electra_jax.errors import ElectraError
from tests import testing


def _documents(path):
  return [d for d in text_files.iter_documents([path])]


@pytest.fixture(scope="module")
def formats(corpus_and_tokenizer, tmp_path_factory):
  """{format: train_files} holding the same documents: the session corpus's first two files as
  text, the same documents as .jsonl.gz records and as Parquet (two files each)."""
  files, model = corpus_and_tokenizer
  texts = files.split(",")[:2]
  root = tmp_path_factory.mktemp("streaming")
  jsonl, parquet = [], []
  for k, path in enumerate(texts):
    records = ["\n".join(d) for d in _documents(path)]
    jsonl.append(str(root / f"part{k}.jsonl.gz"))
    with gzip.open(jsonl[-1], "wt", encoding="utf-8") as f:
      f.writelines(json.dumps({"text": t}) + "\n" for t in records)
    parquet.append(str(root / f"part{k}.parquet"))
    pq.write_table(pa.table({"text": records}), parquet[-1], row_group_size=50)
  return {"text": ",".join(texts), "jsonl.gz": ",".join(jsonl),
          "parquet": ",".join(parquet)}, model


def _config(train_files, model, **data):
  config = testing.fast_config(train_files, model)
  config.data.streaming = True
  for key, value in data.items():
    config.data[key] = value
  return config


def _assert_same_batches(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


def test_pieces_cut_text_at_documents_and_keep_record_files_whole(formats):
  files, _ = formats
  text = files["text"].split(",")
  options = text_files.TextOptions()
  pieces = streaming.pieces_of(text, options, piece_bytes=50_000)
  assert len(pieces) > len(text) and all(end > begin for _, begin, end in pieces)
  spec = streaming.StreamSpec((), (), options, recipe.Recipe("", "", True, 32), 0, 0, 0.0)
  read = [d for piece in pieces
          for d in streaming.piece_documents(spec, piece, text_files.TextStats())]
  assert read == [d for path in text for d in _documents(path)]  # Every document once.
  records = files["parquet"].split(",")
  assert streaming.pieces_of(records, options) == [(p, 0, -1) for p in records]
  cleaned = text_files.TextOptions(cleanup="gutenberg")
  assert streaming.pieces_of(text, cleaned) == [(p, 0, -1) for p in text]


@pytest.mark.parametrize("kind", ["text", "jsonl.gz", "parquet"])
def test_a_stream_resumes_exactly_from_its_state(formats, kind):
  """Batches 40..59 of an uninterrupted stream == a stream started from the state at 40 (in
  this process, and for one format in two Grain worker processes)."""
  files, model = formats
  config = _config(files[kind], model)
  data = pipeline.build_pretraining_data(config.data, "unused", 512, seed=0)
  reader = data.train_iterator(8, seed=0)
  straight = [next(reader) for _ in range(60)]
  state = reader.state_at(40)
  with pytest.raises(ValueError, match="not kept"):
    reader.state_at(61)
  reader.close()
  for workers in (0, 2) if kind == "jsonl.gz" else (0,):  # Workers: the same for any format.
    data.loader_workers = workers
    resumed = data.train_iterator(8, seed=0, position=40, state=state)
    try:
      _assert_same_batches([next(resumed) for _ in range(20)], straight[40:])
    finally:
      resumed.close()
  assert len(data.eval["input_ids"]) > 0  # Held-out documents' examples.


def test_held_out_documents_are_a_seeded_share_never_trained_on(formats):
  files, model = formats
  spec = streaming.StreamSpec((), (), text_files.TextOptions(),
                              recipe.Recipe(model, "auto", True, 32), 0, 0, 0.25)
  documents = [[f"sentence {i}."] for i in range(2000)]
  train, held = streaming.split_held_out(spec, 3, documents)
  assert len(held) / len(documents) == pytest.approx(0.25, abs=0.03)
  assert sorted(train + held) == sorted(documents) and not {d[0] for d in train} & {
      d[0] for d in held}
  assert streaming.split_held_out(spec, 3, documents) == (train, held)  # Every epoch, host.
  assert streaming.split_held_out(spec, 4, documents)[1] != held


def test_the_formats_stream_the_same_examples(formats):
  files, model = formats
  first = {}
  for kind in ("jsonl.gz", "parquet"):
    data = pipeline.build_pretraining_data(_config(files[kind], model).data, "unused", 512,
                                           seed=0)
    reader = data.train_iterator(8, seed=0)
    first[kind] = [next(reader) for _ in range(5)]
    reader.close()
  _assert_same_batches(first["jsonl.gz"], first["parquet"])


def test_training_stopped_by_sigterm_and_resumed_streams_the_same_batches(
    formats, tmp_path, monkeypatch):
  """The checkpoint stores the stream's state at the step it saved (the prefetcher ahead of
  it), and the resumed run (with a worker process) continues it."""
  files, model = formats
  testing.assert_sigterm_resume_is_exact(_config(files["jsonl.gz"], model), tmp_path,
                                         monkeypatch, streaming.StreamLoader,
                                         {"data.loader_workers": 1})


def _mixture_config(files, model, **data):
  """A streamed mixture: the Parquet files (60%) and the .jsonl.gz files (40%)."""
  mixture = (f"0.6:{files['parquet'].replace(',', '|')},"
             f"0.4:{files['jsonl.gz'].replace(',', '|')}")
  return _config("", model, mixture=mixture, **data)


def test_a_streamed_mixture_resumes_exactly_from_its_state(formats):
  """A mixture streams (data.streaming with data.mixture): its sources' shares hold, its
  batches from the state at batch 12 (each stream's piece and examples dealt) are the
  uninterrupted run's, read in this process and with a worker process per stream."""
  files, model = formats
  data = pipeline.build_pretraining_data(_mixture_config(files, model).data, "unused", 512,
                                         seed=0)
  assert data.train is None and data.source.streamed == [0, 1]
  assert len(data.eval["input_ids"]) > 0
  reader = data.train_iterator(8, seed=0)
  assert isinstance(reader, mixture_lib.StreamedMixtureLoader)
  want = [next(reader) for _ in range(30)]
  state = reader.state_at(12)
  assert len(state) == 2 and all(len(s) == 2 for s in state)
  shares = reader.take_shares()
  rows = reader.mixture.schedule.counts_before(100 * 8)  # A round: the shares exactly.
  assert rows.tolist() == [480, 320]
  assert set(shares) == {"mixture/0_part0.parquet", "mixture/1_part0.jsonl.gz"}
  reader.close()
  for workers in (0, 1):
    data.loader_workers = workers
    resumed = data.train_iterator(8, seed=0, position=12, state=state)
    got = [next(resumed) for _ in range(18)]
    resumed.close()
    _assert_same_batches(got, want[12:])
  with pytest.raises(ElectraError, match="holds no stream state"):
    data.train_iterator(8, seed=0, position=12)
  # The two files of each format hold the same documents: a source's stream is its own.
  assert not all(np.array_equal(a["input_ids"], b["input_ids"])
                 for a, b in zip(want, want[1:]))


@pytest.mark.full  # Three short training runs.
def test_a_streamed_mixture_stopped_by_sigterm_resumes_the_same_batches(formats, tmp_path,
                                                                        monkeypatch):
  """A Parquet and a JSON Lines source streamed as one mixture: SIGTERM mid-run, the
  checkpoint keeps both streams' states, and the resumed run (a worker process per stream)
  trains on the batches of the run that never stopped."""
  files, model = formats
  testing.assert_sigterm_resume_is_exact(_mixture_config(files, model), tmp_path, monkeypatch,
                                         mixture_lib.StreamedMixtureLoader,
                                         {"data.loader_workers": 1})


@pytest.mark.parametrize("change, message", [
    ({"tokenizer_model": ""}, "no tokenizer is trained on it first: set "
     "--config.data.tokenizer_model"),
    ({"train_files": ""}, "streams --config.data.train_files"),
    ({"mixture": "1:{files}", "train_files": "", "tokenizer_model": ""},
     "no tokenizer is trained on it first"),
])
def test_streaming_errors(formats, change, message):
  files, model = formats
  config = _config(files["text"], model)
  for key, value in change.items():
    config.data[key] = value.format(files=files["text"].replace(",", "|"))
  with pytest.raises(ElectraError, match=message):
    pipeline.build_pretraining_data(config.data, "unused", 512, seed=0)


def test_a_stream_needs_its_state_to_resume_and_counts_for_unigram(formats):
  files, model = formats
  data = pipeline.build_pretraining_data(_config(files["text"], model).data, "unused", 512,
                                         seed=0)
  with pytest.raises(ElectraError, match="holds no stream state"):
    data.train_iterator(8, seed=0, position=5)
  with pytest.raises(ElectraError, match="generator='unigram' needs the corpus's token counts"):
    data.token_counts(512)
  with pytest.raises(ElectraError, match="streamed its text"):
    pipeline.held_out_sentences(_config(files["text"], model).data, seed=0)


def test_a_bad_record_is_one_error_naming_it_from_a_worker_process(formats, tmp_path):
  """A record without the text field, met as a worker builds its piece: the same one error the
  in-memory reading gives, raised in the training process; a corpus with no text is one error
  too, not an endless search."""
  _, model = formats
  bad = tmp_path / "bad.jsonl"
  bad.write_text(json.dumps({"text": "A first sentence. And a second one.\nMore text."}) + "\n"
                 + json.dumps({"body": "no text field"}) + "\n")
  config = _config(str(bad), model, eval_fraction=0.0, loader_workers=1)
  data = pipeline.build_pretraining_data(config.data, "unused", 512, seed=0)
  reader = data.train_iterator(8, seed=0)
  try:
    with pytest.raises(ElectraError, match=r"bad.jsonl:2 has no field 'text' \(its fields: "
                       r"\['body'\]\); set --config.data.text_field"):
      next(reader)
  finally:
    reader.close()
  empty = tmp_path / "empty.jsonl"
  empty.write_text(json.dumps({"text": ""}) + "\n")
  data = pipeline.build_pretraining_data(_config(str(empty), model, eval_fraction=0.0).data,
                                         "unused", 512, seed=0)
  with pytest.raises(ElectraError, match="gave no training examples"):
    next(data.train_iterator(8, seed=0))
