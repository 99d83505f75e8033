"""`python -m electra_jax.embed evaluate | encode | rerank | bm25`: the sentence-embedding and
reranking command line.

See `electra_jax.embed` for what each subcommand reads and writes.
"""

from __future__ import annotations

import io
import json
import sys

from absl import flags
import numpy as np

from electra_jax import cli
from electra_jax import fileio
from electra_jax.errors import ElectraError

# absl's --help prints the main module's docstring: show the package's.
from electra_jax import embed as _package  # pylint: disable=wrong-import-position
__doc__ = _package.__doc__  # pylint: disable=redefined-builtin

SUBCOMMANDS = ("evaluate", "encode", "rerank", "bm25")
_COMMON = ("checkpoint", "pooling", "max_seq_length", "batch_size", "dtype")
_FLAGS_OF = {"evaluate": (*_COMMON, "sts_file", "retrieval_dir", "output", "top_k",
                          "query_length", "corpus_chunk"),
             "encode": (*_COMMON, "input", "output"),
             "rerank": ("checkpoint", "max_seq_length", "batch_size", "dtype", "retrieval_dir",
                        "run", "first_stage", "top_k", "output"),
             "bm25": ("retrieval_dir", "top_k", "output")}
_REQUIRED = {"evaluate": ("checkpoint",), "encode": ("checkpoint", "input", "output"),
             "rerank": ("checkpoint", "retrieval_dir"), "bm25": ("retrieval_dir",)}
_EXAMPLES = {
    "evaluate": "python -m electra_jax.embed evaluate --checkpoint=runs/embed "
                "--sts_file=glue/STS-B/dev.tsv --retrieval_dir=beir/scifact --output=eval/embed",
    "encode": "python -m electra_jax.embed encode --checkpoint=runs/embed --input=texts.txt "
              "--output=emb.npy",
    "rerank": "python -m electra_jax.embed rerank --checkpoint=runs/rerank "
              "--retrieval_dir=beir/scifact --run=eval/embed/run.trec --top_k=100 "
              "--output=eval/rerank",
    "bm25": "python -m electra_jax.embed bm25 --retrieval_dir=beir/scifact --output=eval/bm25",
}


def _define_flags() -> None:
  """Registers the command's flags (only when this module is the program)."""
  flags.DEFINE_string("checkpoint", None,
                      "A pretraining workdir, an `embed` fine-tuning run's workdir or saved "
                      "model, or a `convert from-hf` output. rerank: a cross-encoder (a `rerank` "
                      "run's workdir or saved model, a one-output classifier, or a converted "
                      "transformers sequence classifier with one label).")
  flags.DEFINE_enum("pooling", None, ["mean", "cls"],
                    "How a text's final states become one vector: mean (over its tokens, "
                    "[CLS] and [SEP] included) or cls (the [CLS] state). Default: an `embed` "
                    "model's own pooling; mean for a raw encoder.")
  flags.DEFINE_integer("max_seq_length", 0,
                       "Tokens per text, [CLS] and [SEP] included (longer texts are cut); 0: an "
                       "`embed` model's training length, else the encoder's "
                       "max_position_embeddings. rerank: tokens per [CLS] query [SEP] document "
                       "[SEP] pair; 0: the length the model was trained with, else "
                       "min(512, max_position_embeddings).")
  flags.DEFINE_integer("batch_size", 64, "Texts (rerank: pairs) per model call.")
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "The compute dtype.")
  flags.DEFINE_string("sts_file", "",
                      "evaluate: an STS file, CSV/TSV/JSON Lines with sentence1, sentence2, "
                      "score (GLUE's STS-B dev.tsv as it is): Spearman and Pearson of the "
                      "cosine.")
  flags.DEFINE_string("retrieval_dir", "",
                      "evaluate: a retrieval set in the BEIR layout (corpus.jsonl, "
                      "queries.jsonl, qrels/test.tsv or qrels/dev.tsv): nDCG@10, MRR@10, "
                      "Recall@100, MAP@100 of an exact search. rerank, bm25: the retrieval set "
                      "whose first stage is reranked / searched.")
  flags.DEFINE_integer("top_k", 100,
                       "evaluate: documents ranked per query (the depth of run.trec); at least "
                       "100. rerank: first-stage documents reranked per query; bm25: documents "
                       "ranked per query; at least 1.")
  flags.DEFINE_string("run", "",
                      "rerank: the first stage, a TREC run file of --retrieval_dir ('qid Q0 "
                      "docid rank score tag' lines, e.g. evaluate's run.trec).")
  flags.DEFINE_string("first_stage", "",
                      "rerank: 'bm25' reranks BM25's run (bm25s over the corpus) instead of "
                      "--run.")
  flags.DEFINE_integer("query_length", 0,
                       "evaluate, a ColBERT (multi-vector) model: positions per query, [CLS], "
                       "[Q] and [SEP] included (longer queries are cut and counted); 0: the "
                       "model's own.")
  flags.DEFINE_integer("corpus_chunk", 0,
                       "evaluate: documents embedded and searched at a time; 0: 64 batches "
                       "(single vectors), the whole corpus if its token vectors fit 1 GiB "
                       "(a ColBERT model; else an error asking for a chunk size).")
  flags.DEFINE_string("input", None,
                      "encode: a UTF-8 text file, one text a line (no empty lines).")
  flags.DEFINE_string("output", None,
                      "evaluate, rerank, bm25: a directory for metrics.json and run.trec "
                      "(optional; the metrics are printed either way). encode: the .npy file of "
                      "the float32 [N, H] embeddings.")


def read_texts(path: str) -> list[str]:
  """The lines of a UTF-8 text file, one text each (a byte order mark and "\\r\\n" line ends
  removed; a final line end starts no empty line).

  Raises:
    ElectraError: no such file, not UTF-8, no line, or an empty (or all-space) line.
  """
  if not fileio.isfile(path):
    raise ElectraError(f"--input={path} does not exist; pass a text file, one text a line")
  data = fileio.read_bytes(path)
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise ElectraError(f"{path} is not UTF-8 (line {line}: {e.reason}); save it as "
                       "UTF-8") from e
  lines = text.split("\n")
  if lines[-1] == "":
    lines.pop()
  texts = [line[:-1] if line.endswith("\r") else line for line in lines]
  if not texts:
    raise ElectraError(f"{path} is empty; it needs one text a line")
  for number, line in enumerate(texts, start=1):
    if not line.strip():
      raise ElectraError(f"{path}:{number}: an empty line; remove it (the rows of the output "
                         "follow the lines, one text each)")
  return texts


def save_embeddings(path: str, embeddings: np.ndarray) -> None:
  """Writes `embeddings` to `path` as a .npy file (exactly that name), atomically."""
  buffer = io.BytesIO()
  np.save(buffer, embeddings)
  directory = fileio.dirname(path)
  if directory:
    fileio.makedirs(directory)
  fileio.write_atomic(path, buffer.getvalue())


def _embedder(fl):
  from electra_jax.finetune.embed import model  # pylint: disable=import-outside-toplevel
  if fl.batch_size < 1:
    raise ElectraError(f"--batch_size={fl.batch_size} must be at least 1")
  if fl.max_seq_length < 0:
    raise ElectraError(f"--max_seq_length={fl.max_seq_length} must be 0 (the model's) or more")
  if fl["query_length"].present and fl.query_length < 4:
    raise ElectraError(f"--query_length={fl.query_length} is too short for [CLS] [Q] text "
                       "[SEP]; pass 4 or more (or leave it out: the model's own)")
  return model.load_embedder(fl.checkpoint, pooling=fl.pooling,
                             max_seq_length=fl.max_seq_length or None, dtype=fl.dtype,
                             query_length=fl.query_length or None)


def _evaluate_command(fl) -> None:
  from electra_jax.finetune.embed import evaluation  # pylint: disable=import-outside-toplevel
  if not fl.sts_file and not fl.retrieval_dir:
    raise ElectraError(f"evaluate needs --sts_file=FILE or --retrieval_dir=DIR (or both), e.g. "
                       f"{_EXAMPLES['evaluate']}")
  if fl.top_k < evaluation.MIN_TOP_K:
    raise ElectraError(f"--top_k={fl.top_k} is below {evaluation.MIN_TOP_K}: Recall@100 and "
                       f"MAP@100 need each query's top {evaluation.MIN_TOP_K}")
  embedder = _embedder(fl)
  multi = getattr(embedder, "vectors", "single") == "multi"
  results = evaluation.evaluate(
      embedder if multi else lambda texts: embedder.encode(texts, batch_size=fl.batch_size),
      sts_file=fl.sts_file, retrieval_dir=fl.retrieval_dir, output_dir=fl.output or None,
      batch_size=fl.batch_size, top_k=fl.top_k, corpus_chunk=fl.corpus_chunk)
  print(json.dumps(results), flush=True)
  if fl.output:
    print(f"evaluate: wrote {fileio.join(fl.output, evaluation.METRICS_FILE)}"
          + (f" and {evaluation.RUN_FILE}" if fl.retrieval_dir else ""), file=sys.stderr,
          flush=True)


def _encode_command(fl) -> None:
  texts = read_texts(fl.input)
  embedder = _embedder(fl)
  if getattr(embedder, "vectors", "single") == "multi":
    raise ElectraError(f"{fl.checkpoint} is a ColBERT (multi-vector) model: a text has a "
                       "vector per token, not one row of an [N, H] array; score it with "
                       "`python -m electra_jax.embed evaluate`, or export it with `python -m "
                       "electra_jax.convert to-sentence-transformers` and use "
                       "MultiVectorEncoder.encode_query / encode_document")
  embeddings = embedder.encode(texts, batch_size=fl.batch_size, progress="encode")
  save_embeddings(fl.output, embeddings)
  print(f"encode: {len(texts)} texts of {fl.input} -> {fl.output} (float32 "
        f"[{embeddings.shape[0]}, {embeddings.shape[1]}])", file=sys.stderr, flush=True)


def _check_first_stage(fl) -> None:
  """Raises ElectraError unless exactly one of --run and --first_stage (a known one) is given."""
  from electra_jax.finetune.rerank import first_stage  # pylint: disable=import-outside-toplevel
  if bool(fl.run) == bool(fl.first_stage):
    raise ElectraError("rerank needs one first stage: --run=RUN.trec (e.g. evaluate's run.trec) "
                       "or --first_stage=bm25, not " + ("both" if fl.run else "neither")
                       + f"; e.g. {_EXAMPLES['rerank']}")
  if fl.first_stage and fl.first_stage not in first_stage.FIRST_STAGES:
    raise ElectraError(f"--first_stage={fl.first_stage!r}; choose "
                       f"{' or '.join(first_stage.FIRST_STAGES)} (or pass --run=RUN.trec)")


def _first_stage(fl, data):
  """(the first stage's run of `data`, its name) as --run or --first_stage say."""
  from electra_jax.finetune.rerank import first_stage  # pylint: disable=import-outside-toplevel
  if fl.run:
    return first_stage.read_run(fl.run, data, fl.top_k), fl.run
  return first_stage.bm25_run(data, fl.top_k), first_stage.BM25


def _rerank_command(fl) -> None:
  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.embed import evaluation as retrieval
  from electra_jax.finetune.rerank import evaluation, first_stage, model
  # pylint: enable=import-outside-toplevel
  _check_first_stage(fl)
  first_stage.check_top_k(fl.top_k)
  if fl.batch_size < 1:
    raise ElectraError(f"--batch_size={fl.batch_size} must be at least 1")
  if fl.max_seq_length < 0:
    raise ElectraError(f"--max_seq_length={fl.max_seq_length} must be 0 (the model's) or more")
  # Bad input fails before the model is loaded.
  data = retrieval.read_retrieval(fl.retrieval_dir)
  candidates, source = _first_stage(fl, data)
  before = retrieval.retrieval_metrics(data.qrels, candidates)
  reranker = model.load_reranker(fl.checkpoint, max_seq_length=fl.max_seq_length or None,
                                 dtype=fl.dtype)
  results = evaluation.evaluate(
      lambda queries, documents: reranker.score(queries, documents, fl.batch_size,
                                                progress="rerank"),
      data, candidates, output_dir=fl.output or None)
  print(json.dumps(results), flush=True)
  print(f"rerank: {source}'s top {fl.top_k} of {len(data.query_ids)} queries: ndcg@10 "
        f"{before['retrieval/ndcg@10']:.4f} -> {results['retrieval/ndcg@10']:.4f}"
        + (f"; wrote {fileio.join(fl.output, evaluation.METRICS_FILE)} and "
           f"{evaluation.RUN_FILE}" if fl.output else ""), file=sys.stderr, flush=True)


def _bm25_command(fl) -> None:
  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.embed import evaluation as retrieval
  from electra_jax.finetune.rerank import first_stage
  # pylint: enable=import-outside-toplevel
  first_stage.check_top_k(fl.top_k)
  data = retrieval.read_retrieval(fl.retrieval_dir)
  ranking = first_stage.bm25_run(data, fl.top_k)
  results = retrieval.retrieval_metrics(data.qrels, ranking)
  if fl.output:
    fileio.makedirs(fl.output)
    fileio.write_atomic(fileio.join(fl.output, retrieval.RUN_FILE),
                        retrieval.trec_run(ranking, tag=first_stage.BM25))
    fileio.write_atomic(fileio.join(fl.output, retrieval.METRICS_FILE),
                        json.dumps(results, indent=2) + "\n")
  print(json.dumps(results), flush=True)
  if fl.output:
    print(f"bm25: wrote {fileio.join(fl.output, retrieval.METRICS_FILE)} and "
          f"{retrieval.RUN_FILE}", file=sys.stderr, flush=True)


def _main(argv: list[str]) -> None:
  """Runs the subcommand named by the first positional argument."""
  command = cli.subcommand(
      argv, SUBCOMMANDS, noun="subcommand",
      choose=f"the subcommand is {' or '.join(repr(c) for c in SUBCOMMANDS)}",
      none_example=f", e.g. {_EXAMPLES['evaluate']}", flag_example="--checkpoint=CKPT")
  fl = flags.FLAGS
  cli.check_subcommand_flags(command, fl, _REQUIRED, _FLAGS_OF, _EXAMPLES[command])
  {"evaluate": _evaluate_command, "encode": _encode_command, "rerank": _rerank_command,
   "bm25": _bm25_command}[command](fl)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
