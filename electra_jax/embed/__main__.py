"""`python -m electra_jax.embed evaluate | encode`: the sentence-embedding command line.

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

SUBCOMMANDS = ("evaluate", "encode")
_COMMON = ("checkpoint", "pooling", "max_seq_length", "batch_size", "dtype")
_FLAGS_OF = {"evaluate": (*_COMMON, "sts_file", "retrieval_dir", "output", "top_k"),
             "encode": (*_COMMON, "input", "output")}
_REQUIRED = {"evaluate": ("checkpoint",), "encode": ("checkpoint", "input", "output")}
_EXAMPLES = {
    "evaluate": "python -m electra_jax.embed evaluate --checkpoint=runs/embed "
                "--sts_file=glue/STS-B/dev.tsv --retrieval_dir=beir/scifact --output=eval/embed",
    "encode": "python -m electra_jax.embed encode --checkpoint=runs/embed --input=texts.txt "
              "--output=emb.npy",
}


def _define_flags() -> None:
  """Registers the command's flags (only when this module is the program)."""
  flags.DEFINE_string("checkpoint", None,
                      "A pretraining workdir, an `embed` fine-tuning run's workdir or saved "
                      "model, or a `convert from-hf` output.")
  flags.DEFINE_enum("pooling", None, ["mean", "cls"],
                    "How a text's final states become one vector: mean (over its tokens, "
                    "[CLS] and [SEP] included) or cls (the [CLS] state). Default: an `embed` "
                    "model's own pooling; mean for a raw encoder.")
  flags.DEFINE_integer("max_seq_length", 0,
                       "Tokens per text, [CLS] and [SEP] included (longer texts are cut); 0: an "
                       "`embed` model's training length, else the encoder's "
                       "max_position_embeddings.")
  flags.DEFINE_integer("batch_size", 64, "Texts per model call.")
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "The compute dtype.")
  flags.DEFINE_string("sts_file", "",
                      "evaluate: an STS file, CSV/TSV/JSON Lines with sentence1, sentence2, "
                      "score (GLUE's STS-B dev.tsv as it is): Spearman and Pearson of the "
                      "cosine.")
  flags.DEFINE_string("retrieval_dir", "",
                      "evaluate: a retrieval set in the BEIR layout (corpus.jsonl, "
                      "queries.jsonl, qrels/test.tsv or qrels/dev.tsv): nDCG@10, MRR@10, "
                      "Recall@100, MAP@100 of an exact search.")
  flags.DEFINE_integer("top_k", 100,
                       "evaluate: documents ranked per query (the depth of run.trec); at least "
                       "100.")
  flags.DEFINE_string("input", None,
                      "encode: a UTF-8 text file, one text a line (no empty lines).")
  flags.DEFINE_string("output", None,
                      "evaluate: a directory for metrics.json and run.trec (optional; the "
                      "metrics are printed either way). encode: the .npy file of the float32 "
                      "[N, H] embeddings.")


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
  return model.load_embedder(fl.checkpoint, pooling=fl.pooling,
                             max_seq_length=fl.max_seq_length or None, dtype=fl.dtype)


def _evaluate_command(fl) -> None:
  from electra_jax.finetune.embed import evaluation  # pylint: disable=import-outside-toplevel
  if not fl.sts_file and not fl.retrieval_dir:
    raise ElectraError(f"evaluate needs --sts_file=FILE or --retrieval_dir=DIR (or both), e.g. "
                       f"{_EXAMPLES['evaluate']}")
  if fl.top_k < evaluation.MIN_TOP_K:
    raise ElectraError(f"--top_k={fl.top_k} is below {evaluation.MIN_TOP_K}: Recall@100 and "
                       f"MAP@100 need each query's top {evaluation.MIN_TOP_K}")
  embedder = _embedder(fl)
  results = evaluation.evaluate(
      lambda texts: embedder.encode(texts, batch_size=fl.batch_size),
      sts_file=fl.sts_file, retrieval_dir=fl.retrieval_dir, output_dir=fl.output or None,
      batch_size=fl.batch_size, top_k=fl.top_k)
  print(json.dumps(results), flush=True)
  if fl.output:
    print(f"evaluate: wrote {fileio.join(fl.output, evaluation.METRICS_FILE)}"
          + (f" and {evaluation.RUN_FILE}" if fl.retrieval_dir else ""), file=sys.stderr,
          flush=True)


def _encode_command(fl) -> None:
  texts = read_texts(fl.input)
  embedder = _embedder(fl)
  embeddings = embedder.encode(texts, batch_size=fl.batch_size, progress="encode")
  save_embeddings(fl.output, embeddings)
  print(f"encode: {len(texts)} texts of {fl.input} -> {fl.output} (float32 "
        f"[{embeddings.shape[0]}, {embeddings.shape[1]}])", file=sys.stderr, flush=True)


def _main(argv: list[str]) -> None:
  """Runs the subcommand named by the first positional argument."""
  command = cli.subcommand(
      argv, SUBCOMMANDS, noun="subcommand",
      choose=f"the subcommand is {' or '.join(repr(c) for c in SUBCOMMANDS)}",
      none_example=f", e.g. {_EXAMPLES['evaluate']}", flag_example="--checkpoint=CKPT")
  fl = flags.FLAGS
  cli.check_subcommand_flags(command, fl, _REQUIRED, _FLAGS_OF, _EXAMPLES[command])
  {"evaluate": _evaluate_command, "encode": _encode_command}[command](fl)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
