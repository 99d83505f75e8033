"""Checks a config before any work starts, so a bad value fails in one clear line."""

from __future__ import annotations

import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.models import encoder
from electra_jax.models import layers
from electra_jax.data import pipeline
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import text_files
from electra_jax.data.sources import mixture as mixture_source
from electra_jax.pretrain import continued
from electra_jax.pretrain import objectives
from electra_jax.pretrain.objectives.base import SpecialIds
from electra_jax.pretrain.objectives.corruption import GENERATORS, MASKING_MODES, MASKING_SAMPLERS
from electra_jax.pretrain.objectives.electra import ALGORITHMS
from electra_jax.training import ranges


def _require(condition: bool, message: str) -> None:
  if not condition:
    raise ElectraError(message)


def check_model_choices(m: ml_collections.ConfigDict, seq_len: int | None = None,
                        packed: bool = False) -> None:
  """model.dtype, model.remat and model.attention name things that exist and can run here
  (`seq_len`: the sequence length the model will see, for the attention kernels; `packed`:
  rows hold several documents, which some kernels cannot keep apart)."""
  _require(m.dtype in electra.DTYPES,
           f"model.dtype={m.dtype!r}; choose one of {', '.join(sorted(electra.DTYPES))}")
  remat = electra.remat_name(m.remat)
  _require(remat in encoder.REMAT_POLICIES,
           f"model.remat={m.remat!r}; choose one of {', '.join(encoder.REMAT_POLICIES)}")
  _check_architecture(m)
  attention.resolve(m.attention, dropout_rate=m.attention_dropout_prob,
                    dtype=electra.DTYPES[m.dtype], seq_len=seq_len,
                    windowed=electra.encoder_configs(m)[0].has_local_layers, packed=packed)
  init = m.get("plain_dense_init", "glorot_uniform")
  _require(init in layers.KERNEL_INITS,
           f"model.plain_dense_init={init!r}; choose one of {', '.join(layers.KERNEL_INITS)}")
  try:
    sharing = electra.weight_sharing_of(m)
  except ValueError as e:
    raise ElectraError(str(e)) from e
  if sharing == "all":
    _require(m.generator_hidden_size == 1.0 and m.generator_layers == 1.0,
             "model.weight_sharing='all' makes the generator the discriminator's own "
             f"Transformer, so it needs a full-size generator (generator_hidden_size="
             f"{m.generator_hidden_size}, generator_layers={m.generator_layers}); set both to "
             "1.0 or choose weight_sharing 'embeddings', 'none' or 'gdes'")


def _check_architecture(m: ml_collections.ConfigDict) -> None:
  """model.architecture and the modern block's settings (`EncoderConfig.check`), for the
  discriminator and the generator. Whether the attention takes the local layers' window is
  `attention.resolve`'s check (`windowed`: "cudnn" is refused, "splash" takes it)."""
  try:
    for cfg in electra.encoder_configs(m):
      cfg.check()
  except ValueError as e:
    raise ElectraError(str(e)) from e


MIN_EVAL_EXAMPLES = 100  # Fewer held-out examples than this make evaluation noisy.


def advice(config: ml_collections.ConfigDict) -> list[str]:
  """Settings that can run but are probably not what the user meant (logged as warnings)."""
  t = config.train
  out = []
  if t.warmup_steps >= t.num_train_steps > 0:
    out.append(f"train.warmup_steps={t.warmup_steps} >= train.num_train_steps="
               f"{t.num_train_steps}: the learning rate never reaches its peak "
               f"({t.learning_rate}); lower --config.train.warmup_steps")
  return out


def eval_advice(num_examples: int) -> str:
  """A warning when evaluation will run on too few held-out examples ("" otherwise)."""
  if 0 < num_examples < MIN_EVAL_EXAMPLES:
    return (f"evaluation runs on only {num_examples} held-out examples, so its metrics are "
            f"noisy; raise data.eval_fraction, add data.eval_files, or raise train.eval_batches")
  return ""


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError naming the first field that cannot work, and how to fix it."""
  m, d, t, o = config.model, config.data, config.train, config.objective
  continued.check_choices(config)
  if d.get("mixture", ""):  # Its syntax and weights, before any source is read.
    mixture_source.check_config(d)
  extends = bool(config.get("init_checkpoint", "")) and config.init_extend_positions == "copy"
  _require(extends or d.max_seq_length <= m.max_position_embeddings,
           f"data.max_seq_length={d.max_seq_length} exceeds model.max_position_embeddings="
           f"{m.max_position_embeddings}; lower --config.data.max_seq_length or raise "
           "--config.model.max_position_embeddings")
  _require(d.max_seq_length >= 8,
           f"data.max_seq_length={d.max_seq_length} is too short; use at least 8")
  _require(m.hidden_size % m.num_heads == 0,
           f"model.hidden_size={m.hidden_size} is not divisible by model.num_heads="
           f"{m.num_heads}; pick a head count that divides the hidden size")
  gen_hidden = int(round(m.hidden_size * m.generator_hidden_size))
  gen_heads = max(1, gen_hidden // 64)
  _require(gen_hidden >= 1 and gen_hidden % gen_heads == 0,
           f"the generator's hidden size {gen_hidden} (model.hidden_size * "
           f"model.generator_hidden_size) is not divisible by its {gen_heads} heads "
           "(hidden // 64); change --config.model.generator_hidden_size")
  _require(int(round(m.num_layers * m.generator_layers)) >= 1,
           "model.generator_layers leaves the generator with no layers; raise it")
  _require(m.vocab_size > 5, f"model.vocab_size={m.vocab_size} is too small")
  check_model_choices(m, d.max_seq_length, packed=bool(d.get("packing", False)))
  _require(0.0 < o.mask_prob <= 1.0, f"objective.mask_prob={o.mask_prob} must be in (0, 1]")
  _require(0.0 <= o.mask_token_prob <= 1.0,
           f"objective.mask_token_prob={o.mask_token_prob} must be in [0, 1]")
  random_prob = o.get("random_token_prob", 0.0)
  _require(0.0 <= random_prob <= 1.0 - o.mask_token_prob + 1e-9,
           f"objective.random_token_prob={random_prob} must be in [0, 1 - mask_token_prob]"
           f" (mask_token_prob={o.mask_token_prob})")
  sampler = o.get("masking_sampler", "without_replacement")
  _require(sampler in MASKING_SAMPLERS,
           f"objective.masking_sampler={sampler!r}; choose one of {', '.join(MASKING_SAMPLERS)}")
  masking = o.get("masking", "token")
  _require(masking in MASKING_MODES,
           f"objective.masking={masking!r}; choose one of {', '.join(MASKING_MODES)}")
  _require(masking == "token" or sampler == "without_replacement",
           f"objective.masking={masking} chooses whole words without replacement; "
           "objective.masking_sampler=with_replacement applies to masking=token only")
  _require(0.0 < o.get("span_p", 0.2) <= 1.0,
           f"objective.span_p={o.get('span_p')} must be in (0, 1]")
  _require(o.get("span_max_words", 10) >= 1,
           f"objective.span_max_words={o.get('span_max_words')} must be at least 1")
  _require(o.get("generator", "learned") in GENERATORS,
           f"objective.generator={o.get('generator')!r}; choose one of {', '.join(GENERATORS)}")
  _require(t.get("algorithm", "joint") in ALGORITHMS,
           f"train.algorithm={t.get('algorithm')!r}; choose one of {', '.join(ALGORITHMS)}")
  _require(o.max_predictions <= d.max_seq_length,
           f"objective.max_predictions={o.max_predictions} exceeds data.max_seq_length="
           f"{d.max_seq_length}")
  _require(o.temperature > 0, f"objective.temperature={o.temperature} must be positive")
  _require(t.batch_size >= 1, f"train.batch_size={t.batch_size} must be positive")
  _require(t.num_train_steps >= 1, f"train.num_train_steps={t.num_train_steps} must be positive")
  _require(t.stop_at_step >= 0, f"train.stop_at_step={t.stop_at_step} must be >= 0")
  _require(t.warmup_steps >= 0, f"train.warmup_steps={t.warmup_steps} must be >= 0")
  _require(t.log_every_steps >= 1, f"train.log_every_steps={t.log_every_steps} must be >= 1")
  _require(t.checkpoint_every_steps >= 1,
           f"train.checkpoint_every_steps={t.checkpoint_every_steps} must be >= 1")
  _require(t.eval_every_steps >= 0, f"train.eval_every_steps={t.eval_every_steps} must be >= 0")
  _require(t.eval_batches >= 1, f"train.eval_batches={t.eval_batches} must be >= 1")
  _require(t.get("prefetch_batches", 2) >= 0,
           f"train.prefetch_batches={t.get('prefetch_batches')} must be >= 0 (0: no prefetch)")
  pipeline.read_options(d)  # data.shard_order, loader_workers, loader_threads: checked there.
  # The example recipe and the text options, by the checks the data path makes (one place).
  recipe_lib.Recipe.from_config(d, d.tokenizer_model)
  text_files.TextOptions.from_config(d).validate()
  _require(0.0 <= d.eval_fraction < 1.0,
           f"data.eval_fraction={d.eval_fraction} must be in [0, 1)")
  _check_ranges(config)


# (field, interval): every numeric field whose meaning has a range, in interval notation
# ("(0, inf)"). A value outside it trains something other than what the field says (a negative
# learning rate climbs the loss), so it fails before any data work.
RANGES = (
    ("model.hidden_dropout_prob", "[0, 1)"),
    ("model.attention_dropout_prob", "[0, 1)"),
    ("model.initializer_range", "(0, inf)"),
    ("model.layer_norm_eps", "(0, inf)"),
    ("model.generator_hidden_size", "(0, 1]"),
    ("model.generator_layers", "(0, 1]"),
    ("model.embedding_size", "[1, inf)"),
    ("model.num_layers", "[1, inf)"),
    ("model.num_heads", "[1, inf)"),
    ("model.intermediate_size", "[1, inf)"),
    ("model.type_vocab_size", "[1, inf)"),
    ("objective.gen_weight", "[0, inf)"),
    ("objective.disc_weight", "[0, inf)"),
    ("data.shuffle_buffer", "[1, inf)"),
    ("train.learning_rate", "[0, inf)"),  # 0: no updates (the untrained baseline).
    ("train.weight_decay", "[0, inf)"),
    ("train.adam_b1", "[0, 1)"),
    ("train.adam_b2", "[0, 1)"),
    ("train.adam_eps", "(0, inf)"),
    ("train.max_grad_norm", "[0, inf)"),
    ("train.keep_checkpoints", "[1, inf)"),
    ("train.generator_steps", "[0, inf)"),
    ("train.peak_tflops", "[0, inf)"),
    ("train.grad_accum_steps", "[1, inf)"),
)


def _check_ranges(config: ml_collections.ConfigDict) -> None:
  ranges.check_ranges(config, RANGES)
  policy = config.train.get("nonfinite_policy", "stop")
  _require(policy in ("stop", "skip"),
           f"train.nonfinite_policy={policy!r}; choose one of stop, skip")


def validate_objective(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError when `objective.name` names no objective, or the objective cannot
  train this combination of settings (what its `from_config` refuses: Electric with another
  generator, two-stage training of networks of different sizes, ...). Checked without data:
  with placeholder special ids and, for a unigram generator, placeholder token counts."""
  objective = objectives.objective_class(config.objective.name)
  counts = (np.ones(config.model.vocab_size, np.int64)
            if objectives.needs_unigram_counts(config) else None)
  objective.from_config(config, SpecialIds(pad=0, cls=1, sep=2, mask=3), counts)


def validate_all(config: ml_collections.ConfigDict) -> None:
  """Every check of a pretraining config that needs neither data nor devices (`validate`, then
  `validate_objective`): what `--show_config` runs."""
  validate(config)
  validate_objective(config)
