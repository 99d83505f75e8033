"""Sizing training for Cloud TPU slices without a TPU: the real training step compiled by
libtpu's compiler on this host (the `tpu` extra: pip install -e '.[tpu]').

  python -m electra_jax.benchmark.tpu --config=configs/base.py --topology=v5litepod-16 ...
  python -m electra_jax.benchmark.tpu.table --out=runs/tpu_reports ...

`python -m electra_jax.benchmark.tpu` (this package's command, `cli`) compiles one step for one
slice and reports its memory per chip, fit, FLOPs, collectives and a roofline estimate, or
finds the cheapest settings that fit (`--fit`: bfloat16, gradient accumulation, FSDP, remat); it takes the same flags as, and is the same as,
`python -m electra_jax.benchmark --topology=...`. `table` compiles the shipped presets on
several slices and prints docs/TPU.md's table.

Modules: `slices` (slice names, the chips' published figures, compile-only devices),
`topology` (building, compiling and sizing the step), `collectives` (counting a compiled step's
collectives from its HLO), `cli` (the command), `table` (the presets' tables) and `recommended`
(the settings that run each preset's paper batch on each slice, as data).
"""
