"""The same ELECTRA pretraining step in Hugging Face transformers (PyTorch), timed side by side
with electra-jax's (`python -m electra_jax.benchmark --compare=hf`).

The PyTorch step is what a user of transformers would write for the config's model: an
`ElectraForMaskedLM` generator and an `ElectraForPreTraining` discriminator of the config's
sizes sharing one embedding module (the generator's output layer tied to it), masking of
`max_predictions` positions (85% shown as [MASK]), the generator's loss at those positions,
Gumbel-max samples (no gradient), the discriminator's loss over every real token, loss = MLM +
50 * Disc, backward, global-norm clipping at 1 and an AdamW step. It runs on the same synthetic
batch, on the CPU (or a CUDA GPU when both frameworks see one). transformers computes the
generator's logits at every position (its models have no "only these positions" input);
electra-jax computes them at the masked positions only, as the original ELECTRA does.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Mapping

import ml_collections
import numpy as np

from electra_jax.convert import hf_configs
from electra_jax.errors import ElectraError
from electra_jax.pretrain.objectives import corruption


def import_torch():
  try:
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("--compare=hf needs PyTorch and transformers: pip install -e '.[test]' "
                       f"(or torch and transformers) ({e})") from e
  return torch, transformers


def torch_device():
  """(torch, transformers, device): a CUDA GPU when PyTorch sees one, else the CPU with a thread
  per core."""
  torch, transformers = import_torch()
  device = "cuda" if torch.cuda.is_available() else "cpu"
  if device == "cpu":
    torch.set_num_threads(os.cpu_count() or 1)
  return torch, transformers, device


def build(config: ml_collections.ConfigDict, device: str, pad_id: int):
  """(generator, discriminator, optimizer, parameters) in PyTorch for `config.model`."""
  torch, transformers = import_torch()
  disc_json, gen_json = hf_configs.model_config_to_hf_configs(config.model, pad_token_id=pad_id)
  disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(**disc_json)).to(device)
  gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**gen_json)).to(device)
  # ELECTRA's sharing: one embedding module, the generator's output layer tied to its table.
  gen.electra.embeddings = disc.electra.embeddings
  gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
  params, seen = [], set()
  for p in list(disc.parameters()) + list(gen.parameters()):
    if id(p) not in seen:
      seen.add(id(p))
      params.append(p)
  t = config.train
  optimizer = torch.optim.AdamW(params, lr=t.learning_rate, betas=(t.adam_b1, t.adam_b2),
                                eps=t.adam_eps, weight_decay=t.weight_decay)
  return gen, disc, optimizer, params


def step_times(config: ml_collections.ConfigDict, batch: Mapping[str, np.ndarray],
               special: Any, steps: int, warmup: int) -> dict[str, Any]:
  """Median seconds of the PyTorch step on `batch` (and the threads / device it used)."""
  torch, _, device = torch_device()
  gen, disc, optimizer, params = build(config, device, special.pad)
  gen.train()
  disc.train()
  ids = torch.as_tensor(batch["input_ids"], dtype=torch.long, device=device)
  mask = torch.as_tensor(batch["input_mask"], dtype=torch.long, device=device)
  segments = torch.as_tensor(batch["segment_ids"], dtype=torch.long, device=device)
  predictions = corruption.max_predictions(config)
  candidates = (mask > 0) & ~torch.isin(
      ids, torch.as_tensor(special.never_masked(), device=device))
  o = config.objective

  def one_step():
    scores = torch.rand(ids.shape, device=device).masked_fill(~candidates, -1.0)
    positions = scores.topk(predictions, dim=1).indices  # [B, P]
    show_mask = torch.rand(positions.shape, device=device) < o.mask_token_prob
    masked = ids.scatter(1, positions, torch.where(show_mask, special.mask,
                                                   ids.gather(1, positions)))
    logits = gen(input_ids=masked, attention_mask=mask, token_type_ids=segments).logits
    vocab = logits.shape[-1]
    at_masked = logits.gather(1, positions[..., None].expand(-1, -1, vocab))  # [B, P, V]
    targets = ids.gather(1, positions)
    mlm = torch.nn.functional.cross_entropy(at_masked.reshape(-1, vocab), targets.reshape(-1))
    with torch.no_grad():
      uniform = torch.rand(at_masked.shape, device=device).clamp_min(1e-9)
      sampled = (at_masked / o.temperature - torch.log(-torch.log(uniform))).argmax(-1)
    corrupted = ids.scatter(1, positions, sampled)
    labels = (corrupted != ids).float()
    disc_logits = disc(input_ids=corrupted, attention_mask=mask,
                       token_type_ids=segments).logits
    weights = mask.float()
    disc_loss = (torch.nn.functional.binary_cross_entropy_with_logits(
        disc_logits, labels, reduction="none") * weights).sum() / weights.sum()
    loss = o.gen_weight * mlm + o.disc_weight * disc_loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, config.train.max_grad_norm)
    optimizer.step()
    return loss

  def synchronize():
    if device == "cuda":
      torch.cuda.synchronize()

  for _ in range(warmup):
    one_step()
  synchronize()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    loss = float(one_step().detach())
    synchronize()
    times.append(time.perf_counter() - start)
  return {"step_s": statistics.median(times), "device": device,
          "threads": torch.get_num_threads(), "torch": torch.__version__, "final_loss": loss}
