r"""The 2020 block against ModernBERT's, each with ELECTRA's objective and BERT's, at equal FLOPs.

  python -m electra_jax.experiments --config=configs/experiments/backbone.py[:SCALE] \
      --workdir=runs/backbone --config.finetune.data_dir=GLUE_DIR \
      --config.data_overrides="data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"

Four variants, the two blocks (`model.architecture`, docs/modern.md) crossed with the two
objectives (`objective.name`, docs/objectives.md): electra_rtd (the pretraining config as it
is), modern_rtd, electra_mlm (BERT's masked LM) and modern_mlm.

Equal FLOPs, the framework's way (budget="flops", electra_jax/experiments/spec.py): every
variant spends the pretraining FLOPs of `reference_steps` steps of electra_rtd, so its steps
are that budget over its own analytic FLOPs per step (electra_jax/pretrain/flops.py, the
paper's convention: 3x the forward matrix products, attention included). The modern block's
step differs from the 2020 block's in two counted ways: its GeGLU has three matrices (input,
gate, output) instead of two, and its local layers attend to `local_attention + 1` keys instead
of the whole row. The first is cancelled by the sizes below (equal feed-forward parameters),
so what is left is the window: a modern step is cheaper and runs more steps; the MLM variants
(no generator) run more steps still. At the tiny scale (1.47e13 FLOPs): electra_rtd 1000
steps, modern_rtd 1031, electra_mlm 1111, modern_mlm 1141; at the small scale's 100k reference
steps: 100,000, 103,072, 107,903 and 110,791 (tests/test_experiments.py checks these counts
by hand). Element-wise work (norms, GeGLU's product, rotary), which the convention leaves out,
is not budgeted, and the counted window is `local_attention + 1` keys for every query, though
queries near a row's ends see fewer (the convention's upper bound).

The modern block's sizes are the scale's own (hidden size, layers, heads, embedding size, the
generator's quarter width), so the comparison is of the block, not of the model's shape:
- the GeGLU width is the multiple of 8 nearest 2/3 of the scale's feed-forward width (tiny:
  512 -> 344, small: 1024 -> 680), so that three H x F matrices hold the parameters of the 2020
  block's two (within 1%; a wider GeGLU would be a bigger model, not a better block);
- the window is 64 tokens (32 each way) on the scale's 128-token rows: a window as long as the
  row (ModernBERT's 128, configs/modern_small.py's) would leave the local layers global in
  all but name; 64 is half the row, the proportion configs/modern_tiny.py uses (32 on 64);
- global layers as ModernBERT spaces them, every third (small: layers 0, 3, 6, 9), or every
  other one in the tiny scale's two layers (layer 0 global, layer 1 local, as
  configs/modern_tiny.py), so that both kinds of layer are in play;
- ModernBERT's other choices come with the block: rotary bases 160,000 / 10,000, no biases,
  LayerNorm epsilon 1e-5. The optimizer (peak rate, warmup share, batch) is the scale's for
  all four: tuned for the 2020 block, not for the pre-norm one.
"""

from electra_jax.experiments import scales

# The modern block at each scale (see the docstring): GeGLU width, window, global spacing, and
# ModernBERT's LayerNorm epsilon; everything else is the scale's pretraining config.
_MODERN = {
    "tiny": ("model.architecture=modern model.intermediate_size=344 model.local_attention=64 "
             "model.global_attn_every_n_layers=2 model.layer_norm_eps=1e-5"),
    "small": ("model.architecture=modern model.intermediate_size=680 model.local_attention=64 "
              "model.global_attn_every_n_layers=3 model.layer_norm_eps=1e-5"),
}


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  modern = _MODERN[scale]
  # The 2020 block (learned positions, post-LayerNorm, GELU feed-forward, full attention) with
  # ELECTRA's replaced-token detection: the pretraining config as it is; it sets the budget.
  config.variants.electra_rtd = ""
  # ModernBERT's block (rotary, pre-LayerNorm, GeGLU, local/global attention), the same
  # objective: its generator has the modern block too, a quarter of the width.
  config.variants.modern_rtd = modern
  # The 2020 block with BERT's masked LM (the network predicts the masked tokens, no generator).
  config.variants.electra_mlm = "objective.name=mlm"
  # ModernBERT's block with BERT's masked LM, ModernBERT's own objective (it masks 30%; here
  # the 15% of the other variants, so that only the block differs from electra_mlm).
  config.variants.modern_mlm = f"{modern} objective.name=mlm"
  config.reference_variant = "electra_rtd"  # Its reference_steps set every variant's FLOPs.
  config.order = "electra_rtd,modern_rtd,electra_mlm,modern_mlm"  # Run and report order.
  return config
