"""A tiny modern encoder (ModernBERT's block) for the demo and the tests: `configs/tiny.py` with
`model.architecture="modern"`, runs in minutes on 2 CPU cores on the embedded corpus.

The block: rotary positions, pre-LayerNorm, a GeGLU feed-forward, no segment embeddings, and
local attention between global layers (docs/architecture.md, `electra_jax/models/encoder.py`).
At this size the window is 32 tokens (16 each way) on rows of 64, and every other layer is
global, so both kinds of layer are in play. Everything else (objective, data, schedule, the
CPU-speed settings explained in configs/tiny.py) is tiny.py's.
"""

import importlib.util
import os


def _tiny():
  """configs/tiny.py, loaded from beside this file (configs/ is not a package)."""
  spec = importlib.util.spec_from_file_location(
      "electra_jax_configs_tiny", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "tiny.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config():
  config = _tiny().get_config()
  config.model.architecture = "modern"  # ModernBERT's block.
  config.model.intermediate_size = 256  # GeGLU width F (two H x F inputs and one F x H output).
  config.model.local_attention = 32  # Local layers see 16 tokens on either side.
  config.model.global_attn_every_n_layers = 2  # Layer 0 global, layer 1 local.
  config.model.global_rope_theta = 160_000.0  # ModernBERT's rotary bases.
  config.model.local_rope_theta = 10_000.0
  config.model.layer_norm_eps = 1e-5  # ModernBERT's.
  config.model.embedding_size = 128  # E = H: no projection, as in ModernBERT.
  config.data.packing = True  # Examples back to back in each row, as ModernBERT trains.
  return config
