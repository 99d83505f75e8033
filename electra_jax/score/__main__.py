r"""`python -m electra_jax.score`: a pretrained encoder as a scorer of text, from the command line.

  python -m electra_jax.score tokens --checkpoint=RUN [--input=FILE|-] [--output=FILE|-] \
      [--format=jsonl|pretty] [--threshold=0.5] [--batch_size=64] [--max_length=0]
  python -m electra_jax.score sentences --checkpoint=RUN [--input=...] [--output=...]
  python -m electra_jax.score rerank --checkpoint=RUN [--input=...] [--output=...] [--per_token]
  python -m electra_jax.score sentences|rerank|tokens --checkpoint=RUN \
      --scorer=auto|discriminator|energy|pll ...
  python -m electra_jax.score evaluate --checkpoint=ELECTRA_RUN --output_dir=DIR \
      [--electric=ELECTRIC_RUN] [--mlm=MLM_RUN] [--text=HELDOUT.txt] [--glue_dir=GLUE] \
      [--max_sentences=2000] [--seed=0]

--checkpoint: a pretraining workdir (any objective with a replaced-token head, or Electric), a
checkpoints/<step>/ directory, a `convert from-hf` output, or a Hugging Face
ElectraForPreTraining directory. Input: plain text, one item per line (rerank: a line's
candidates separated by tabs), or JSON lines with "text" (rerank: "candidates") and an optional
"id". Output: JSON lines, one per input line, in input order.

--scorer=auto (the default) scores an Electric checkpoint's energies and any other checkpoint
with its discriminator; --scorer=discriminator or --scorer=energy insists on one (an Electric
checkpoint has no P(replaced) and an ELECTRA one no energies: either mismatch is an error).

The discriminator (ELECTRA; its P(replaced) per token):

  tokens     {"line", "id"?, "text", "tokens": [{"token", "text", "start", "end",
             "p_replaced"}]}; with --format=pretty, the text with suspicious words marked
  sentences  {"line", "id"?, "text", "fluency" (mean log P(original) over the tokens),
             "max_p_replaced", "num_suspicious" (tokens above --threshold), "num_tokens",
             "windows"}
  rerank     {"line", "id"?, "order" (candidate indices, best first), "candidates": [{"text",
             "fluency"}], "best"}

Energies (Electric, electra_jax/score/energy.py: p(token | context) ~ exp(-energy), one pass
per text, windowed as the discriminator):

  tokens     {"line", "id"?, "text", "tokens": [{"token", "text", "start", "end", "energy"}]}
  sentences  {"line", "id"?, "text", "score" (-sum of the energies), "mean" (-their mean),
             "num_tokens", "windows"}
  rerank     {"line", "id"?, "order" (by "score"; by "mean" with --per_token), "candidates":
             [{"text", "score", "mean"}], "best"}

--format=pretty is the discriminator's (energies have no threshold scale).

With --scorer=pll, the masked LM's pseudo-log-likelihood (electra_jax/score/pll.py: an MLM
objective's encoder, or an ELECTRA run's generator; one pass per token): tokens give
"log_prob" per token, sentences {"pll", "mean" (per token), "num_tokens"}, rerank orders by
"pll" (by the mean with --per_token); a text longer than one window is a line error.

A line that cannot be scored (empty, bad JSON, no "text") gives {"line", "error"} and is
counted in the summary printed to stderr; nothing is dropped. `evaluate` writes
DIR/evaluation.json and DIR/reliability.png (see electra_jax/score/evaluate.py): the
discriminator of --checkpoint, and in its "scorers" section the discriminator against the
pseudo-log-likelihood (of --mlm, or of --checkpoint's generator) and Electric's energies
(--electric), on the same sentences and corruptions.
"""

from __future__ import annotations

import contextlib
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
  flags.DEFINE_enum("scorer", "auto", ["auto", "discriminator", "energy", "pll"],
                    "tokens, sentences, rerank: the discriminator's P(replaced), an Electric "
                    "checkpoint's energies, or the masked LM's pseudo-log-likelihood (one pass "
                    "per token; an MLM objective's encoder or an ELECTRA run's generator); auto: "
                    "energy for an Electric checkpoint, the discriminator otherwise.")
  flags.DEFINE_bool("per_token", False, "rerank with energies or --scorer=pll: rank by the "
                    "mean per token (length-normalised) instead of the sum, which favours "
                    "candidates by their length.")
  flags.DEFINE_string("electric", None, "evaluate: an Electric checkpoint whose energies are "
                      "compared with the discriminator's on the same sentences and edits.")
  flags.DEFINE_string("mlm", None, "evaluate: a checkpoint whose masked LM gives the "
                      "pseudo-log-likelihood compared (an MLM objective's run); by default "
                      "--checkpoint's generator.")
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
  """Scores the records with the discriminator or with energies (both windowed)."""
  if FLAGS.scorer == "pll":
    _score_pll(command, scorer, records, out, counts)
    return
  energies = _is_energy(scorer)
  kwargs = {"batch_size": FLAGS.batch_size, "max_length": FLAGS.max_length or None}
  good = [r for r in records if r.error is None]
  if command == "tokens":
    results = dict(zip((id(r) for r in good),
                       scorer.score_tokens([r.text for r in good], **kwargs)))
  elif command == "sentences":
    if not energies:
      kwargs["threshold"] = FLAGS.threshold
    results = dict(zip((id(r) for r in good), scorer.score_sentences(
        [r.text for r in good], **kwargs)))
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
      if energies:
        candidates = [{"text": c, "score": e.score, "mean": e.mean}
                      for c, e in zip(record.candidates, result.sentences, strict=True)]
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
  command = cli.subcommand(argv, COMMANDS, noun="command",
                           choose=f"give one of {' | '.join(COMMANDS)}",
                           flag_example="--checkpoint=RUN")
  if command == "evaluate":
    _evaluate()
    return
  for flag in ("electric", "mlm"):
    if getattr(FLAGS, flag):
      raise ElectraError(f"--{flag} is for the evaluate command; {command} scores with "
                         "--checkpoint alone (choose how with --scorer)")
  if FLAGS.scorer == "pll":
    if FLAGS.format == "pretty":
      raise ElectraError("--format=pretty marks the discriminator's suspicious words; drop it "
                         "with --scorer=pll")
    from electra_jax.score import pll  # pylint: disable=import-outside-toplevel
    scorer = pll.load_pll_scorer(FLAGS.checkpoint, dtype=FLAGS.dtype)
    scorer.per_token = FLAGS.per_token
  else:
    from electra_jax.score import load_scorer  # pylint: disable=import-outside-toplevel
    scorer = load_scorer(FLAGS.checkpoint, dtype=FLAGS.dtype, kind=FLAGS.scorer)
    if _is_energy(scorer):
      scorer.per_token = FLAGS.per_token
      if FLAGS.format == "pretty":
        raise ElectraError("--format=pretty marks words above the discriminator's P(replaced) "
                           "--threshold; energies have no such scale: drop it (tokens gives "
                           "each token's \"energy\")")
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


def _is_energy(scorer) -> bool:
  from electra_jax.score import energy  # pylint: disable=import-outside-toplevel
  return isinstance(scorer, energy.EnergyScorer)


def _evaluate() -> None:
  """`evaluate`: the ELECTRA run of --checkpoint, with --electric's energies and --mlm's PLL."""
  from electra_jax.score import evaluate  # pylint: disable=import-outside-toplevel
  from electra_jax.score import loader  # pylint: disable=import-outside-toplevel
  from electra_jax.score import pll  # pylint: disable=import-outside-toplevel
  from electra_jax.score import scorers  # pylint: disable=import-outside-toplevel
  if FLAGS.scorer not in ("auto", "discriminator"):
    raise ElectraError(
        "evaluate compares the scorers itself, each from its own flag (--checkpoint: an ELECTRA "
        "run's discriminator, and its generator's PLL; --electric: an Electric run's energies; "
        f"--mlm: another checkpoint's PLL); drop --scorer={FLAGS.scorer}")
  if not FLAGS.output_dir:
    raise ElectraError("evaluate needs --output_dir=DIR (for evaluation.json and "
                       "reliability.png)")
  weights = loader.load_weights(FLAGS.checkpoint)
  if loader.is_energy_checkpoint(weights):
    raise ElectraError(
        f"--checkpoint={FLAGS.checkpoint} is an Electric checkpoint (energies, no P(replaced) "
        "to calibrate); evaluate takes an ELECTRA run as --checkpoint and the Electric run as "
        f"--electric={FLAGS.checkpoint}")
  scorer = scorers.from_weights(weights, FLAGS.dtype, kind="discriminator")
  electric = None
  if FLAGS.electric:
    electric_weights = loader.load_weights(FLAGS.electric)
    if not loader.is_energy_checkpoint(electric_weights):
      raise ElectraError(
          f"--electric={FLAGS.electric} was trained with the "
          f"{electric_weights.encoder.get('objective')} objective, not Electric; pass an "
          "Electric run (objective.name=\"electric\"), or drop --electric")
    electric = scorers.from_weights(electric_weights, FLAGS.dtype, kind="energy")
  masked_lm = pll.load_pll_scorer(FLAGS.mlm, dtype=FLAGS.dtype) if FLAGS.mlm else None
  if FLAGS.text:
    sentences = evaluate.read_sentences(FLAGS.text, FLAGS.max_sentences)
  else:
    sentences = evaluate.run_held_out_sentences(scorer, FLAGS.max_sentences, FLAGS.seed)
  results = evaluate.evaluate(scorer, sentences, FLAGS.output_dir, glue_dir=FLAGS.glue_dir,
                              seed=FLAGS.seed, electric=electric, masked_lm=masked_lm,
                              batch_size=FLAGS.batch_size)
  print(evaluate.summary(results), flush=True)


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
