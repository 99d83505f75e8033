"""`python -m electra_jax.convert from-hf | from-tf | to-hf | to-sentence-transformers |
extend-vocab`: the conversion command line.

See `electra_jax.convert` for what each subcommand reads and writes.
"""

from __future__ import annotations

import json
import os

from absl import flags
from absl import logging

from electra_jax import cli
from electra_jax.convert.files import (
    convert_from_hf, convert_to_hf, convert_to_sentence_transformers)
from electra_jax.convert import sentence_transformers as st_folder
from electra_jax.convert import vocab_extension
from electra_jax.convert.tf_checkpoint import convert_from_tf
from electra_jax.convert.hf_configs import ARCHITECTURES, DISCRIMINATOR, GENERATOR
from electra_jax.convert.hf_encoder import GENERATOR_EMBEDDINGS, count_params
from electra_jax.convert.hf_heads import PROBLEM_TYPES
from electra_jax.models import electra
from electra_jax.training import pretrained

# absl's --help prints the main module's docstring: show the package's.
from electra_jax import convert as _package  # pylint: disable=wrong-import-position
__doc__ = _package.__doc__  # pylint: disable=redefined-builtin

SUBCOMMANDS = ("from-hf", "from-tf", "to-hf", "to-sentence-transformers", "extend-vocab")
# The parameter group of the discriminator's replaced-token-detection head.
DISCRIMINATOR_HEAD = pretrained.DEFAULT_ENCODER["head"]
_FLAGS_OF = {"from-hf": ("hf_dir", "output", "generator_dir", "vocab_file",
                         "generator_embeddings", "overwrite"),
             "from-tf": ("checkpoint", "vocab_file", "output", "overwrite", "num_heads",
                         "generator_num_heads"),
             "to-hf": ("checkpoint", "output", "overwrite"),
             "to-sentence-transformers": ("checkpoint", "output", "pooling", "max_seq_length",
                                          "overwrite"),
             "extend-vocab": ("checkpoint", "output", "tokens", "from_corpus", "num_tokens",
                              "overwrite")}
_REQUIRED = {"from-hf": ("hf_dir", "output"), "from-tf": ("checkpoint", "output"),
             "to-hf": ("checkpoint", "output"),
             "to-sentence-transformers": ("checkpoint", "output"),
             "extend-vocab": ("checkpoint", "output")}
_EXAMPLES = {
    "from-hf": "python -m electra_jax.convert from-hf --hf_dir=electra-base-discriminator "
               "--generator_dir=electra-base-generator --output=ckpt/electra-base",
    "from-tf": "python -m electra_jax.convert from-tf "
               "--checkpoint=electra_small --output=ckpt/electra-small",
    "to-hf": "python -m electra_jax.convert to-hf --checkpoint=runs/small --output=hf/small",
    "to-sentence-transformers": "python -m electra_jax.convert to-sentence-transformers "
                                "--checkpoint=runs/embed --output=st/embed",
    "extend-vocab": "python -m electra_jax.convert extend-vocab --checkpoint=runs/small "
                    "--tokens=words.txt --output=runs/small_words",
}


def _define_flags() -> None:
  """Registers the command's flags (only when this module is the program, see tokenizer.py)."""
  flags.DEFINE_string("hf_dir", None,
                      "from-hf: the Hugging Face ElectraForPreTraining (discriminator) directory, "
                      "or a fine-tuned ElectraForSequenceClassification or "
                      "ElectraForTokenClassification one (as config.json's architectures "
                      "says): config.json, model.safetensors or pytorch_model.bin, vocab.txt. "
                      "Or a ModernBERT one: ModernBertModel or ModernBertForMaskedLM (the "
                      "discriminator's start), ModernBertFor{Sequence,Token}Classification, "
                      "ModernBertForQuestionAnswering, with its tokenizer.json. Or a "
                      "sentence-transformers model folder (modules.json; what "
                      "to-sentence-transformers writes): its ElectraModel or ModernBertModel "
                      "becomes an embedding model with the folder's pooling, normalisation and "
                      "max_seq_length.")
  flags.DEFINE_string("generator_dir", None,
                      "from-hf: the matching ElectraForMaskedLM (or ModernBertForMaskedLM) "
                      "generator directory; omit it "
                      "to convert the discriminator alone (all fine-tuning needs). Not with a "
                      "fine-tuned --hf_dir.")
  flags.DEFINE_string("vocab_file", None,
                      "from-hf, from-tf: the WordPiece vocab.txt, a sentencepiece .model "
                      "(e.g. the copy to-hf writes next to tokenizer.json) or a Hugging Face "
                      "tokenizer.json; default: vocab.txt in --hf_dir (from-hf), next to the "
                      "checkpoint files (from-tf), else the one .model there, else (a "
                      "ModernBERT folder) its tokenizer.json.")
  flags.DEFINE_enum("generator_embeddings", "auto", list(GENERATOR_EMBEDDINGS),
                    "from-hf: auto: share the discriminator's embeddings when the generator's "
                    "copy equals them (as in ELECTRA training), untied when only that fits; "
                    "discriminator: use the discriminator's even when they differ; untied: "
                    "keep the generator's own (needs its embedding_size == hidden_size).")
  flags.DEFINE_string("checkpoint", None,
                      "to-hf, to-sentence-transformers, extend-vocab: a pretraining workdir "
                      "(newest checkpoint), its checkpoints/ directory, one checkpoints/<step>/ "
                      "directory, or a from-hf output; to-sentence-transformers also: an embed "
                      "run's workdir or saved model; to-hf also: a fine-tuned classifier, "
                      "tagger or SQuAD model "
                      "(<task>/seed_<s>/model/) or a fine-tuning workdir of one task (its "
                      "median seed's model). from-tf: an original ELECTRA TensorFlow "
                      "checkpoint (google-research/electra): DIR/model.ckpt[-STEP], or DIR (its "
                      "newest checkpoint).")
  flags.DEFINE_string("output", None,
                      "Required. from-hf, from-tf, extend-vocab: the electra-jax checkpoint "
                      "directory to write. to-hf: the directory for discriminator/ and "
                      "generator/ (a fine-tuned model: sequence_classification/, "
                      "token_classification/ or question_answering/). "
                      "to-sentence-transformers: the model folder (SentenceTransformer(DIR)).")
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --output.")
  flags.DEFINE_string("pooling", None,
                      "to-sentence-transformers: mean (the average of the text's token states, "
                      "[CLS] and [SEP] included) or cls (the [CLS] state); default: an embed "
                      "model's own pooling, mean for a pretrained encoder. A pooling other "
                      "than an embed model's own is an error.")
  flags.DEFINE_integer("max_seq_length", None,
                       "to-sentence-transformers: tokens per text, [CLS] and [SEP] included "
                       "(longer texts are cut); default: an embed model's training length, "
                       "else the model's max_position_embeddings.")
  flags.DEFINE_string("tokens", None,
                      "extend-vocab: a text file of words to add, one per line (blank lines and "
                      "repeats dropped; lowercased etc. as the tokenizer normalizes; a word it "
                      "already encodes as one id is skipped). Or use --from_corpus.")
  flags.DEFINE_string("from_corpus", None,
                      "extend-vocab: comma-separated globs of UTF-8 text files (local or gs://) "
                      "whose --num_tokens most split words to add: the words (as the tokenizer "
                      "normalizes them, split at whitespace and punctuation, punctuation marks "
                      "dropped; sentencepiece: those after whitespace) that it splits into 2+ "
                      "pieces, ranked by frequency x "
                      "(pieces - 1), the tokens a new id saves, then by frequency, then "
                      "alphabetically.")
  flags.DEFINE_integer("num_tokens", None,
                       "extend-vocab with --from_corpus: how many words to add (> 0).")
  flags.DEFINE_integer("num_heads", None,
                       "from-tf only: the discriminator's attention heads, which a TensorFlow "
                       "checkpoint does not record; default: max(1, hidden_size // 64), as the "
                       "original code sets them.", lower_bound=1)
  flags.DEFINE_integer("generator_num_heads", None,
                       "from-tf only: the generator's attention heads; default: max(1, its "
                       "hidden_size // 64), as the original code sets them.", lower_bound=1)


def _millions(n: int) -> str:
  return f"{n / 1e6:.2f}M"


def _from_hf_command(fl) -> str:
  return _converted_summary(convert_from_hf(fl.hf_dir, fl.output, fl.generator_dir,
                                            fl.vocab_file, fl.overwrite,
                                            fl.generator_embeddings))


def _from_tf_command(fl) -> str:
  result = convert_from_tf(fl.checkpoint, fl.output, fl.vocab_file, fl.overwrite, fl.num_heads,
                           fl.generator_num_heads)
  disc, gen = electra.encoder_configs(result.model_config)
  heads = (f"{disc.num_heads} and {gen.num_heads} (discriminator and generator)"
           if "generator" in result.params else str(disc.num_heads))
  return (f"{_converted_summary(result)}; attention heads: {heads}, the original code's "
          "max(1, hidden // 64) unless --num_heads / --generator_num_heads say otherwise")


def _labels_summary(labels, problem_type) -> str:
  """E.g. "3 labels (contradiction, entailment, neutral), single_label_classification"."""
  if problem_type == "regression":
    return "one regression output"
  shown = ", ".join(labels[:8]) + (", ..." if len(labels) > 8 else "")
  return f"{len(labels)} labels ({shown})" + (f", {problem_type}" if problem_type else "")


def _vocabulary_summary(result) -> str:
  if result.tokenizer.kind == "sentencepiece":
    return f"sentencepiece model of {result.vocab_size} pieces"
  if result.tokenizer.kind == "tokenizer_json":
    return f"tokenizer.json of {result.vocab_size} tokens"
  return (f"WordPiece vocabulary of {result.vocab_size} tokens "
          f"({'lowercased' if result.tokenizer.lowercase else 'cased'})")


def _converted_summary(result) -> str:
  """The summary line of from-hf and from-tf."""
  p = result.params
  output = os.path.dirname(os.path.dirname(result.step_dir))
  tokenizer_dir = os.path.join(output, pretrained.TOKENIZER_DIR)
  if (result.finetuned or {}).get("task") == st_folder.EMBED_TASK:
    return _embedding_summary(result)
  if result.finetuned is not None:
    finetuned = result.finetuned
    problem = PROBLEM_TYPES.get(finetuned["problem"])
    labels = _labels_summary(finetuned["labels"] if problem != "regression" else [], problem)
    if finetuned.get("task") == "rerank":
      labels = "a cross-encoder reranker (one relevance logit a pair)"
    if finetuned.get("label_scheme"):
      labels += f", label scheme {finetuned['label_scheme']}"
    return (f"wrote {result.step_dir}: fine-tuned {finetuned['architecture']}, "
            f"{_millions(count_params(p))} parameters, {labels}, max_seq_length "
            f"{finetuned['max_seq_length']}; {_vocabulary_summary(result)} in {tokenizer_dir}; "
            f"use {output} as the initial checkpoint to fine-tune it further (its head "
            "included) or to predict with it, or export it with to-hf")
  # A ModernBertModel or ModernBertForMaskedLM without the RTD head's file has no head.
  disc = count_params({k: p[k] for k in ("embeddings", "discriminator", DISCRIMINATOR_HEAD)
                       if k in p})
  without_head = ("" if DISCRIMINATOR_HEAD in p else " (no replaced-token-detection head: it "
                  "starts afresh if pretraining continues; fine-tuning does not use it)")
  gen_parts = [k for k in ("generator_embeddings", "generator", "generator_predictions")
               if k in p]
  gen = ""
  if gen_parts:
    shared = ("own embeddings" if "generator_embeddings" in p
              else "sharing the discriminator's embeddings")
    gen = (f", generator {_millions(count_params({k: p[k] for k in gen_parts}))} parameters "
           f"more ({shared})")
  notes = "".join(f"; {note}" for note in result.notes)
  return (f"wrote {result.step_dir}: discriminator {_millions(disc)} parameters{without_head}"
          f"{gen}, {_vocabulary_summary(result)} in {tokenizer_dir}{notes}; use {output} as the "
          "initial checkpoint for fine-tuning, or export it with to-hf")


def _to_hf_command(fl) -> str:
  result = convert_to_hf(fl.checkpoint, fl.output, fl.overwrite)
  def architecture(role):  # As written in the folder's config.json (ELECTRA or ModernBERT).
    with open(os.path.join(result.directories[role], "config.json"), encoding="utf-8") as f:
      names = json.load(f).get("architectures") or []
    return names[0] if names else ARCHITECTURES.get(role, ARCHITECTURES[GENERATOR])
  parts = [f"{path} ({architecture(role)}, {_millions(result.param_counts[role])} parameters)"
           for role, path in result.directories.items()]
  tokenizer = (f" with {', '.join(result.tokenizer_files)}" if result.tokenizer_files
               else " without tokenizer files")
  main_role = DISCRIMINATOR if DISCRIMINATOR in result.directories else next(
      iter(result.directories))
  if result.labels is not None:
    tokenizer += f"; {_labels_summary(result.labels, result.problem_type)}"
  return (f"wrote step {result.step} as {' and '.join(parts)}{tokenizer}; load with "
          f"transformers.{architecture(main_role)}.from_pretrained("
          f"{result.directories[main_role]!r})")


def _to_sentence_transformers_command(fl) -> str:
  result = convert_to_sentence_transformers(fl.checkpoint, fl.output, fl.pooling,
                                            fl.max_seq_length, fl.overwrite)
  settings = result.settings
  normalized = "normalized" if settings.normalized else "not normalized"
  tokenizer = (", ".join(result.tokenizer_files) if result.tokenizer_files
               else "no tokenizer files")
  if result.multi is not None:
    multi = result.multi
    return (f"wrote step {result.step} as {result.directory} (sentence-transformers "
            f"MultiVectorEncoder: {result.architecture}, {_millions(result.param_count)} "
            f"parameters, {multi.colbert_dim} dimensions a token, queries of "
            f"{multi.query_length} positions, documents of {multi.max_seq_length} tokens at "
            f"most, prompts [Q] and [D]; {tokenizer}); load with "
            f"sentence_transformers.MultiVectorEncoder({result.directory!r})")
  return (f"wrote step {result.step} as {result.directory} (sentence-transformers: "
          f"{result.architecture}, {_millions(result.param_count)} parameters, "
          f"{settings.pooling} pooling, {normalized}, max_seq_length "
          f"{settings.max_seq_length}; {tokenizer}); load with "
          f"sentence_transformers.SentenceTransformer({result.directory!r})")


def _embedding_summary(result) -> str:
  """The summary line of from-hf of a sentence-transformers folder."""
  finetuned = result.finetuned
  output = os.path.dirname(os.path.dirname(result.step_dir))
  tokenizer_dir = os.path.join(output, pretrained.TOKENIZER_DIR)
  normalized = "normalized" if finetuned["normalized"] else "not normalized"
  notes = "".join(f"; {note}" for note in result.notes)
  if finetuned.get("vectors") == "multi":
    markers = finetuned["markers"]
    return (f"wrote {result.step_dir}: ColBERT (multi-vector) model, encoder "
            f"{_millions(count_params(result.params))} parameters, "
            f"{finetuned['colbert_dim']} dimensions a token, queries of "
            f"{finetuned['query_length']} positions ([Q] {markers['query']}), documents of "
            f"{finetuned['max_seq_length']} tokens at most ([D] {markers['document']}); "
            f"{_vocabulary_summary(result)} in {tokenizer_dir}{notes}; evaluate it with "
            f"python -m electra_jax.embed evaluate --checkpoint={output}, fine-tune it further "
            "with configs/embed.py --config.vectors=multi, or export it with "
            "to-sentence-transformers")
  return (f"wrote {result.step_dir}: embedding model, encoder "
          f"{_millions(count_params(result.params))} parameters, {finetuned['pooling']} "
          f"pooling, {normalized}, max_seq_length {finetuned['max_seq_length']}; "
          f"{_vocabulary_summary(result)} in {tokenizer_dir}{notes}; embed or evaluate with "
          f"python -m electra_jax.embed encode|evaluate --checkpoint={output}, fine-tune it "
          "further with configs/embed.py, or export it with to-sentence-transformers")


def _extend_vocab_command(fl) -> str:
  return vocab_extension.summary(vocab_extension.extend_vocab(
      fl.checkpoint, fl.output, tokens=fl.tokens, from_corpus=fl.from_corpus,
      num_tokens=fl.num_tokens, overwrite=fl.overwrite))


def _main(argv: list[str]) -> None:
  """Runs the subcommand named by the first positional argument."""
  command = cli.subcommand(
      argv, SUBCOMMANDS, noun="subcommand",
      choose=f"the subcommand is {' or '.join(repr(c) for c in SUBCOMMANDS)}",
      none_example=f", e.g. {_EXAMPLES['from-hf']}", flag_example="--output=DIR")
  fl = flags.FLAGS
  cli.check_subcommand_flags(command, fl, _REQUIRED, _FLAGS_OF, _EXAMPLES[command])
  if not fl["verbosity"].present:  # Keep orbax's per-file INFO lines out; -v 0 shows them.
    logging.set_verbosity(logging.WARNING)
  if command == "extend-vocab":
    print(_extend_vocab_command(fl), flush=True)
    return
  summary = {"from-hf": _from_hf_command, "from-tf": _from_tf_command,
             "to-hf": _to_hf_command,
             "to-sentence-transformers": _to_sentence_transformers_command}[command](fl)
  print(summary, flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)

