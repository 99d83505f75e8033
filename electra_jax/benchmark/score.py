r"""`python -m electra_jax.benchmark.score`: the scorer's throughput, optionally next to Hugging
Face's PyTorch `ElectraForPreTraining` on the same texts and batch size.

  python -m electra_jax.benchmark.score --checkpoint=RUN [--input=FILE] [--sentences=2000] \
      [--batch_size=64] [--repeats=3] [--compare=hf]

Texts: the lines of --input, or the sentences of the documents the checkpoint's pretraining run
held out. Both sides score the same token ids (electra-jax's tokenizer; tokenizing is timed
separately): electra-jax with its length buckets and one jitted function per bucket, PyTorch
the way a transformers user batches, `batch_size` texts in input order padded to the longest of
the batch, under `torch.inference_mode()`, P(replaced) = sigmoid(logits) brought to the host.
The PyTorch model is the checkpoint's discriminator exported with `convert to-hf`, so both
compute the same function (the benchmark checks the probabilities agree). Reported: the median
of --repeats timed passes over all texts after one untimed pass (compilation, warm-up), as
sentences/s and tokens/s (real tokens, [CLS] and [SEP] included).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any, Callable, Sequence

from absl import flags
import numpy as np

from electra_jax import cli
from electra_jax.errors import ElectraError
from electra_jax.score import evaluate
from electra_jax.score import load_scorer
from electra_jax.score import loader
from electra_jax.score import windows
from electra_jax.score.loader import Scorer


def _median_seconds(run: Callable[[], Any], repeats: int) -> tuple[float, Any]:
  result = run()  # Untimed: compilation and warm-up.
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    result = run()
    times.append(time.perf_counter() - start)
  return statistics.median(times), result


def _hf_probabilities(scorer: Scorer, token_lists: Sequence[Sequence[int]], batch_size: int,
                      repeats: int) -> tuple[float, list[np.ndarray], dict[str, Any]]:
  """(median seconds, per-text P(replaced), details) of transformers' ElectraForPreTraining."""
  from electra_jax.benchmark import hf_compare  # pylint: disable=import-outside-toplevel
  from electra_jax.convert import files  # pylint: disable=import-outside-toplevel
  torch, transformers, device = hf_compare.torch_device()
  tok = scorer.tokenizer
  with tempfile.TemporaryDirectory() as tmp:
    written = files.to_hf(scorer.weights.path, os.path.join(tmp, "hf"))
    model = transformers.ElectraForPreTraining.from_pretrained(written["discriminator"])
  model = model.to(device).eval()
  def run() -> list[np.ndarray]:
    out = []
    with torch.inference_mode():
      for start in range(0, len(token_lists), batch_size):
        chunk = token_lists[start:start + batch_size]
        ids, mask = windows.pack(chunk, len(chunk), max(len(t) for t in chunk) + 2,
                                 cls_id=tok.cls_id, sep_id=tok.sep_id, pad_id=tok.pad_id,
                                 dtype=np.int64)
        logits = model(input_ids=torch.as_tensor(ids, device=device),
                       attention_mask=torch.as_tensor(mask, device=device),
                       token_type_ids=torch.zeros_like(torch.as_tensor(ids, device=device))
                       ).logits
        probs = torch.sigmoid(logits).cpu().numpy()
        out.extend(probs[i, 1:len(t) + 1] for i, t in enumerate(chunk))
    return out

  seconds, probs = _median_seconds(run, repeats)
  return seconds, probs, {"device": device, "threads": torch.get_num_threads(),
                          "torch": torch.__version__, "transformers": transformers.__version__}


def run_score_benchmark(checkpoint: str, texts: Sequence[str] | None = None,
                        sentences: int = 2000, batch_size: int = 64, repeats: int = 3,
                        compare_hf: bool = False) -> dict[str, Any]:
  """Times the scorer (and, with compare_hf, transformers) on `texts` (default: the run's
  held-out sentences); returns the numbers `report` prints."""
  if batch_size < 1 or repeats < 1:
    raise ElectraError(f"--batch_size={batch_size} and --repeats={repeats} must be at least 1")
  scorer = load_scorer(checkpoint, kind="discriminator")  # P(replaced), not energies.
  if texts is None:
    texts = evaluate.run_held_out_sentences(scorer, sentences)
  texts = list(texts)[:sentences] if sentences else list(texts)
  if not texts:
    raise ElectraError("no text to score: pass --input=FILE with non-empty lines")
  max_tokens = scorer.max_length - 2
  start = time.perf_counter()
  token_lists = [ids[:max_tokens] for ids in scorer.tokenizer.encode_batch(texts)]
  tokenize_s = time.perf_counter() - start
  real_tokens = sum(len(ids) + 2 for ids in token_lists)
  seconds, logits = _median_seconds(lambda: scorer.token_logits(token_lists, batch_size),
                                    repeats)
  result = {"checkpoint": scorer.weights.path, "texts": len(texts), "tokens": real_tokens,
            "batch_size": batch_size, "tokenize_s": tokenize_s, "jax_s": seconds,
            "jax_sentences_per_s": len(texts) / seconds, "jax_tokens_per_s": real_tokens / seconds}
  if compare_hf:
    hf_seconds, hf_probs, details = _hf_probabilities(scorer, token_lists, batch_size, repeats)
    ours = np.concatenate([loader.probabilities(x) for x in logits])
    theirs = np.concatenate(hf_probs).astype(np.float64)
    result.update({"hf_s": hf_seconds, "hf_sentences_per_s": len(texts) / hf_seconds,
                   "hf_tokens_per_s": real_tokens / hf_seconds, "speedup": hf_seconds / seconds,
                   "max_abs_probability_difference": float(np.max(np.abs(ours - theirs))),
                   **{f"hf_{k}": v for k, v in details.items()}})
  return result


def report(result: dict[str, Any]) -> str:
  lines = [f"{result['texts']} texts, {result['tokens']:,} tokens, batch {result['batch_size']} "
           f"({result['checkpoint']}); tokenizing {result['tokenize_s']:.2f}s",
           f"electra-jax: {result['jax_s']:.3f}s  sentences_per_s={result['jax_sentences_per_s']:.1f}"
           f"  tokens_per_s={result['jax_tokens_per_s']:,.0f}"]
  if "hf_s" in result:
    lines.append(f"transformers {result['hf_transformers']} (torch {result['hf_torch']}, "
                 f"{result['hf_device']}, {result['hf_threads']} threads): {result['hf_s']:.3f}s  "
                 f"sentences_per_s={result['hf_sentences_per_s']:.1f}  "
                 f"tokens_per_s={result['hf_tokens_per_s']:,.0f}")
    lines.append(f"speedup={result['speedup']:.2f}x  max |P(replaced) difference|="
                 f"{result['max_abs_probability_difference']:.1e}")
  return "\n".join(lines)


def _define_flags() -> None:
  flags.DEFINE_string("checkpoint", None, "A pretraining workdir or checkpoint to score with.")
  flags.DEFINE_string("input", "", "Texts, one per line; default: the run's held-out sentences.")
  flags.DEFINE_integer("sentences", 2000, "Score at most this many texts (0: all).")
  flags.DEFINE_integer("batch_size", 64, "Texts per model call (both frameworks).")
  flags.DEFINE_integer("repeats", 3, "Timed passes (the median is reported).")
  flags.DEFINE_enum("compare", "", ["", "hf"], "hf: also time transformers' PyTorch "
                    "ElectraForPreTraining on the same token ids and batch size.")


def _main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise ElectraError(f"unexpected arguments: {' '.join(argv[1:])}")
  fl = flags.FLAGS
  if not fl.checkpoint:
    raise ElectraError("--checkpoint is required (a pretraining workdir or checkpoint)")
  texts = evaluate.read_sentences(fl.input, 0, "--input") if fl.input else None
  print(report(run_score_benchmark(fl.checkpoint, texts, fl.sentences, fl.batch_size,
                                   fl.repeats, fl.compare == "hf")), flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
