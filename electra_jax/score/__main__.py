r"""`python -m electra_jax.score`: the discriminator as a scorer of text, from the command line.

  python -m electra_jax.score tokens --checkpoint=RUN [--input=FILE|-] [--output=FILE|-] \
      [--format=jsonl|pretty] [--threshold=0.5] [--batch_size=64] [--max_length=0]
  python -m electra_jax.score sentences --checkpoint=RUN [--input=...] [--output=...]
  python -m electra_jax.score rerank --checkpoint=RUN [--input=...] [--output=...]
  python -m electra_jax.score sentences|rerank|tokens --checkpoint=RUN --scorer=pll ...
  python -m electra_jax.score evaluate --checkpoint=RUN --output_dir=DIR \
      [--text=HELDOUT.txt] [--glue_dir=GLUE] [--max_sentences=2000] [--seed=0]

--checkpoint: a pretraining workdir (any objective with a replaced-token head), a
checkpoints/<step>/ directory, a `convert from-hf` output, or a Hugging Face
ElectraForPreTraining directory. Input: plain text, one item per line (rerank: a line's
candidates separated by tabs), or JSON lines with "text" (rerank: "candidates") and an optional
"id". Output: JSON lines, one per input line, in input order:

  tokens     {"line", "id"?, "text", "tokens": [{"token", "text", "start", "end",
             "p_replaced"}]}; with --format=pretty, the text with suspicious words marked
  sentences  {"line", "id"?, "text", "fluency" (mean log P(original) over the tokens),
             "max_p_replaced", "num_suspicious" (tokens above --threshold), "num_tokens",
             "windows"}
  rerank     {"line", "id"?, "order" (candidate indices, best first), "candidates": [{"text",
             "fluency"}], "best"}

With --scorer=pll, the masked LM's pseudo-log-likelihood (electra_jax/score/pll.py: an MLM
objective's encoder, or an ELECTRA run's generator; one pass per token): tokens give
"log_prob" per token, sentences {"pll", "mean" (per token), "num_tokens"}, rerank orders by
"pll" (by the mean with --per_token); a text longer than one window is a line error.

A line that cannot be scored (empty, bad JSON, no "text") gives {"line", "error"} and is
counted in the summary printed to stderr; nothing is dropped. `evaluate` writes
DIR/evaluation.json and DIR/reliability.png (see electra_jax/score/evaluate.py).
"""

from __future__ import annotations

import contextlib
import difflib
import sys
from typing import Any, TextIO

from absl import flags
from absl import logging

from electra_jax import cli
from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.score import textio

FLAGS = flags.FLAGS
COMMANDS = ("tokens", "sentences", "rerank", "evaluate")


def _define_flags() -> None:
  flags.DEFINE_string("checkpoint", None, "The checkpoint or Hugging Face directory to score "
                      "with.")
  flags.DEFINE_string("input", "-", "Input file (plain text or JSON lines); - reads stdin.")
  flags.DEFINE_string("output", "-", "Output JSON-lines file; - writes stdout.")
  flags.DEFINE_enum("format", "jsonl", ["jsonl", "pretty"],
                    "tokens: JSON lines, or the text with suspicious words marked.")
  flags.DEFINE_float("threshold", 0.5, "P(replaced) above which a token is suspicious.")
  flags.DEFINE_integer("batch_size", 64, "Rows per model call.")
  flags.DEFINE_integer("max_length", 0, "Positions per window ([CLS] and [SEP] included); 0: "
                       "the model's max_position_embeddings. Longer texts use windows.")
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Compute dtype.")
  flags.DEFINE_enum("scorer", "discriminator", ["discriminator", "pll"],
                    "tokens, sentences, rerank: the discriminator's P(replaced), or the masked "
                    "LM's pseudo-log-likelihood (one pass per token; an MLM objective's encoder "
                    "or an ELECTRA run's generator).")
  flags.DEFINE_bool("per_token", False, "rerank --scorer=pll: rank by the PLL's mean per token "
                    "(length-normalised) instead of its sum, which favours shorter candidates.")
  flags.DEFINE_string("text", None, "evaluate: held-out sentences, one per line; by default "
                      "the sentences of the documents the pretraining run held out.")
  flags.DEFINE_string("glue_dir", "", "evaluate: a GLUE root with CoLA/ for zero-shot "
                      "grammaticality; empty skips it.")
  flags.DEFINE_string("output_dir", None, "evaluate: where evaluation.json and "
                      "reliability.png go.")
  flags.DEFINE_integer("max_sentences", 2000, "evaluate: at most this many held-out "
                       "sentences (0: all).")
  flags.DEFINE_integer("seed", 0, "evaluate: seeds the corruptions.")
  flags.mark_flags_as_required(["checkpoint"])


def mark_suspicious(text: str, tokens: list[dict[str, Any]], threshold: float,
                    color: bool) -> str:
  """`text` with each word holding a token above `threshold` marked ([[word]] or in red)."""
  ranges = []
  for token in tokens:
    if token["p_replaced"] > threshold:
      start, end = token["start"], token["end"]
      while start > 0 and not text[start - 1].isspace():
        start -= 1
      while end < len(text) and not text[end].isspace():
        end += 1
      if ranges and start <= ranges[-1][1]:
        ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
      else:
        ranges.append((start, end))
  out, last = [], 0
  for start, end in ranges:
    word = text[start:end]
    out.append(text[last:start])
    out.append(f"\033[1;31m{word}\033[0m" if color else f"[[{word}]]")
    last = end
  out.append(text[last:])
  return "".join(out)


def _score_pll(command: str, scorer, records: list[textio.Record], out: TextIO,
               counts: dict[str, int]) -> None:
  """`_score` with the pseudo-log-likelihood scorer (no windows: a longer text is an error)."""
  for record in records:
    texts = record.candidates if command == "rerank" else [record.text]
    if record.error is None and any(scorer.too_long(t) for t in texts):
      record.error = (f"longer than the {scorer.max_length - 2} tokens --scorer=pll scores in "
                      "one window; split it")
  good = [r for r in records if r.error is None]
  if command == "tokens":
    results = scorer.score_tokens([r.text for r in good], FLAGS.batch_size)
  elif command == "sentences":
    results = scorer.score_sentences([r.text for r in good], FLAGS.batch_size)
  else:
    results = scorer.rerank([r.candidates for r in good], FLAGS.batch_size)
  by_record = dict(zip((id(r) for r in good), results))
  for record in records:
    if record.error is not None:
      counts["errors"] += 1
      logging.warning("line %d: %s", record.line, record.error)
      textio.write_record(out, {**record.base(), "error": record.error})
      continue
    result = by_record[id(record)]
    if command == "tokens":
      textio.write_record(out, {**record.base(), "text": record.text, "tokens": result})
    elif command == "sentences":
      textio.write_record(out, {**record.base(), "text": record.text, **vars(result)})
    else:
      key = "pll_per_token" if scorer.per_token else "pll"
      candidates = [{"text": c, key: v} for c, v in zip(record.candidates, result.fluency,
                                                        strict=True)]
      textio.write_record(out, {**record.base(), "order": result.order,
                                "candidates": candidates,
                                "best": record.candidates[result.order[0]]})
    counts["scored"] += 1


def _score(command: str, scorer, records: list[textio.Record], out: TextIO,
           pretty: bool, color: bool, counts: dict[str, int]) -> None:
  if FLAGS.scorer == "pll":
    _score_pll(command, scorer, records, out, counts)
    return
  kwargs = {"batch_size": FLAGS.batch_size, "max_length": FLAGS.max_length or None}
  good = [r for r in records if r.error is None]
  if command == "tokens":
    results = dict(zip((id(r) for r in good),
                       scorer.score_tokens([r.text for r in good], **kwargs)))
  elif command == "sentences":
    results = dict(zip((id(r) for r in good), scorer.score_sentences(
        [r.text for r in good], threshold=FLAGS.threshold, **kwargs)))
  else:
    results = dict(zip((id(r) for r in good),
                       scorer.rerank([r.candidates for r in good], **kwargs)))
  for record in records:
    if record.error is not None:
      counts["errors"] += 1
      logging.warning("line %d: %s", record.line, record.error)
      if pretty:
        out.write(f"# line {record.line}: {record.error}\n")
      else:
        textio.write_record(out, {**record.base(), "error": record.error})
      continue
    result = results[id(record)]
    if command == "tokens":
      tokens = [vars(t) for t in result]
      counts["windowed"] += len(tokens) + 2 > (FLAGS.max_length or scorer.max_length)
      if pretty:
        out.write(mark_suspicious(record.text, tokens, FLAGS.threshold, color) + "\n")
      else:
        textio.write_record(out, {**record.base(), "text": record.text, "tokens": tokens})
    elif command == "sentences":
      counts["windowed"] += result.windows > 1
      textio.write_record(out, {**record.base(), "text": record.text, **vars(result)})
    else:
      candidates = [{"text": c, "fluency": f}
                    for c, f in zip(record.candidates, result.fluency, strict=True)]
      textio.write_record(out, {**record.base(), "order": result.order,
                                "candidates": candidates,
                                "best": record.candidates[result.order[0]]})
    counts["scored"] += 1


@contextlib.contextmanager
def _open(path: str, mode: str, default: TextIO):
  if path == "-":
    yield default
    return
  if "r" in mode and not fileio.isfile(path):
    raise ElectraError(f"--input={path} does not exist; pass a text or JSON-lines file, or - "
                       "for stdin")
  with fileio.open_file(path, mode) as f:
    yield f


def main(argv: list[str]) -> None:
  if len(argv) < 2:
    raise ElectraError(f"no command given; give one of {' | '.join(COMMANDS)} (see --help)")
  if argv[1] not in COMMANDS:
    close = difflib.get_close_matches(argv[1], COMMANDS, n=1)
    raise ElectraError(f"unknown command {argv[1]!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else "")
                       + f"; give one of {' | '.join(COMMANDS)} (see --help)")
  if len(argv) > 2:
    raise ElectraError(f"unexpected arguments after {argv[1]!r}: {' '.join(argv[2:])}; values "
                       "are given as flags, e.g. --checkpoint=RUN")
  command = argv[1]
  if FLAGS.scorer == "pll":
    if command == "evaluate":
      raise ElectraError("evaluate compares scorers with the discriminator's; drop "
                         "--scorer=pll (or use it with tokens, sentences or rerank)")
    if FLAGS.format == "pretty":
      raise ElectraError("--format=pretty marks the discriminator's suspicious words; drop it "
                         "with --scorer=pll")
    from electra_jax.score import pll  # pylint: disable=import-outside-toplevel
    scorer = pll.load_pll_scorer(FLAGS.checkpoint, dtype=FLAGS.dtype)
    scorer.per_token = FLAGS.per_token
  else:
    from electra_jax.score import load_scorer  # pylint: disable=import-outside-toplevel
    scorer = load_scorer(FLAGS.checkpoint, dtype=FLAGS.dtype)
  if command == "evaluate":
    from electra_jax.score import evaluate  # pylint: disable=import-outside-toplevel
    if not FLAGS.output_dir:
      raise ElectraError("evaluate needs --output_dir=DIR (for evaluation.json and "
                         "reliability.png)")
    if FLAGS.text:
      sentences = evaluate.read_sentences(FLAGS.text, FLAGS.max_sentences)
    else:
      sentences = evaluate.run_held_out_sentences(scorer, FLAGS.max_sentences, FLAGS.seed)
    results = evaluate.evaluate(scorer, sentences, FLAGS.output_dir, glue_dir=FLAGS.glue_dir,
                                seed=FLAGS.seed, batch_size=FLAGS.batch_size)
    print(evaluate.summary(results), flush=True)
    return
  counts = {"scored": 0, "errors": 0, "windowed": 0}
  pretty = FLAGS.format == "pretty"
  if pretty and command != "tokens":
    raise ElectraError("--format=pretty is for the tokens command")
  with _open(FLAGS.input, "r", sys.stdin) as source, _open(FLAGS.output, "w", sys.stdout) as out:
    color = pretty and FLAGS.output == "-" and out.isatty()
    for records in textio.read_records(source, want_candidates=command == "rerank"):
      _score(command, scorer, records, out, pretty, color, counts)
      out.flush()
  print(summary_line(command, counts), file=sys.stderr)


def summary_line(command: str, counts: dict[str, int]) -> str:
  """The line a scoring command ends with: how many records it scored, and only the counts
  that are not zero of those it could not score or scored in windows."""
  line = f"{command}: {counts['scored']} scored"
  if counts["errors"]:
    line += f", {counts['errors']} not scored (see their \"error\")"
  if counts["windowed"]:
    line += f", {counts['windowed']} longer than the model's window (scored in windows)"
  return line


if __name__ == "__main__":
  _define_flags()
  cli.run(main)
