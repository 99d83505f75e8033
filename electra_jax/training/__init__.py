"""The training core every job shares (pretraining and fine-tuning).

  state.py        TrainState: step, params, optimizer state, rng
  optimizer.py    AdamW of the original ELECTRA with parameter groups (learning-rate scale,
                  weight decay, trainable) and layer-wise decay as a group rule
  trainer.py      build_trainer: mesh, state shardings, the sharded state, jitted train and eval
                  steps with donation, batch placement
  loop.py         the step loop: metric windows, progress line, evaluation, checkpoints,
                  preemption, signals, non-finite steps
  interrupt.py    SIGTERM/SIGINT: finish the step, save, stop; a second signal aborts
  config_changes.py  what differs between a recorded config and the current one, and which
                  changes a resumed run may make
  ranges.py       numeric config fields checked against their intervals
  metrics.py      (numerator, denominator) metrics, AUC, MetricsLog (TensorBoard +
                  metrics.jsonl + log)
  checkpoints.py  orbax checkpoints of the TrainState; unreadable ones set aside; the
                  preemption sync point
  pretrained.py   restore parts of a checkpoint (model config, tokenizer, encoder, parameter
                  groups) and write converted ones
  parallel.py     the mesh (data, fsdp, tensor; ICI and DCN), logical-axis rules, checks,
                  multi-process start-up
  hardware.py     peak FLOP/s of known accelerators, for MFU

A job gives `build_trainer` three functions (init_params, loss_fn, make_optimizer; pretraining
also prepare_batch, the loss's parameter-free part on the whole batch) and runs
`loop.run`; nothing here names an objective, a metric of one, or a parameter path.
"""
