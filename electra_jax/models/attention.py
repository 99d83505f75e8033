"""Attention implementations behind one signature, chosen by name (`model.attention`).

Every implementation is

  attend(query, key, value, input_mask, *, dropout_rng, dropout_rate, deterministic, dtype,
         causal="none") -> context

with query, key, value: [B, T, N, D] (N heads of size D), input_mask: int [B, T] and context:
[B, T, N, D]. input_mask holds document ids: 0 for padding, k >= 1 for the k-th document of a
packed row (an unpacked row is 1 ... 1 0 ... 0). Query i attends key j only when j is real and
in i's document: input_mask[j] > 0 and input_mask[i] == input_mask[j] (`document_allowed`), so
a packed row computes what its documents would alone. Outputs at padded query positions are
unspecified (every caller ignores them) but finite. `causal` (`CAUSAL`) limits
what each query sees further: "ltr", the keys at its position and to its left; "rtl", those at
its position and to its right (the two towers of Electric's noise model, as the original's
`ltr` / `rtl` attention masks, which include the diagonal). `window` (the modern block's local
layers, `local_window_allows`) limits it to the keys at most window // 2 positions away on
either side; None or 0 is global attention. Scanned layers alternate global and local under a
traced layer index, so there it is a `Window` (a Python int size and a traced "is local" flag);
"xla" also takes a bare traced int scalar. "splash" takes a window (its kernel's own sparse
local mask); "cudnn" refuses one.

  "xla"     softmax(Q K^T / sqrt(D) + document/padding bias) V in plain XLA ops, with dropout
            on the attention probabilities (`attention_dropout_prob`, the paper's 0.1). Any
            device, any dtype; packed rows.
  "cudnn"   cuDNN's fused (flash) attention through `jax.nn.dot_product_attention`, padding
            given as key lengths. NVIDIA GPUs, bfloat16 or float16 compute. No packed rows:
            `resolve(..., packed=True)` refuses it (the public API has no segment ids).
  "splash"  the Pallas TPU splash-attention kernel (`jax.experimental.pallas.ops.tpu`), the
            document ids (padding 0) as its segment ids, a window as the kernel's `LocalMask`
            (blocks outside the
            band are skipped); sequence length a multiple of 128. Under a mesh of several
            devices it runs in `jax.shard_map` over the mesh axes of the logical "batch" and
            "heads" axes (XLA cannot partition the kernel); with no mesh, on the global arrays.
            When the mesh's devices (no mesh: JAX's default backend) are not TPUs it runs in
            Pallas's interpreter (slow; for tests); a TPU slice compiled for on a CPU host gets
            the real kernel.
  "auto"    "cudnn" on a GPU with bfloat16/float16 compute, "splash" on a TPU with a length
            multiple of 128, "xla" otherwise; and "xla" whenever attention dropout is on or
            some layer attends within a window (an explicit "splash" takes windows), or the
            rows are packed on a GPU.

Attention dropout: the fused kernels have none, so "cudnn" and "splash" require
`attention_dropout_prob=0` (one clear error otherwise, never a silent change of recipe) and
"auto" picks them only then. cuDNN's key lengths assume the padding is at the end of each row,
as every electra-jax input has it.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from electra_jax.errors import ElectraError

AttentionFn = Callable[..., jax.Array]
FUSED = ("cudnn", "splash")  # Implementations without attention dropout.
SPLASH_BLOCK = 128  # Splash attention's sequence tiles: T must be a multiple.
CAUSAL = ("none", "ltr", "rtl")  # Directions a query may look in (see the module docstring).


def check_causal(causal: str) -> None:
  if causal not in CAUSAL:
    raise ValueError(f"causal={causal!r}; choose one of {', '.join(CAUSAL)}")


def causal_allowed(seq_len: int, causal: str) -> np.ndarray | None:
  """bool [T, T] (query, key) pairs a `causal` direction allows; None for "none"."""
  check_causal(causal)
  if causal == "none":
    return None
  ones = np.ones((seq_len, seq_len), bool)
  return np.tril(ones) if causal == "ltr" else np.triu(ones)


def local_window_allows(seq_len: int, window) -> jax.Array:
  """bool [T, T]: (query i, key j) with |i - j| <= window // 2, or everywhere when window <= 0
  (a global layer). `window` may be a traced int scalar. Hugging Face's ModernBERT: a local
  layer's `sliding_window` is local_attention // 2, inclusive."""
  positions = jnp.arange(seq_len)
  distance = jnp.abs(positions[:, None] - positions[None, :])
  window = jnp.asarray(window, jnp.int32)
  return (window <= 0) | (distance <= window // 2)


class Window(NamedTuple):
  """A layer's window when whether the layer is local is traced (a scan over the modern
  block's layers): `size` tokens (a Python int, `local_window_allows`) where `local` (a bool
  scalar, usually traced) is true, global attention where it is false."""
  size: int
  local: Any


def window_scalar(window):
  """`window` (None, an int, a traced int scalar or a `Window`) as `local_window_allows` takes
  it: None stays None; a `Window` becomes the int scalar `size` if local else 0."""
  if isinstance(window, Window):
    return jnp.where(window.local, window.size, 0)
  return window


def _no_window(name: str, window) -> None:
  if window is not None:
    raise ElectraError(f"model.attention={name!r} has no local-attention window yet; use "
                       "attention 'splash' (TPU) or 'xla' with model.architecture='modern'")


def bias_from_mask(input_mask: jax.Array, dtype: Any) -> jax.Array:
  """[B, T] input mask (document ids, 0 padding) -> additive bias [B, 1, 1, T]: 0 for real
  keys, a large negative for padding. Padding only: `document_bias` also keeps packed
  documents apart."""
  big_negative = jnp.finfo(dtype).min / 2
  return jnp.where(input_mask[:, None, None, :] > 0, 0.0, big_negative).astype(dtype)


def document_allowed(input_mask: jax.Array) -> jax.Array:
  """bool [B, 1, T, T] (query i, key j) pairs the document ids `input_mask` [B, T] allow: key j
  real (> 0) and in query i's document. A padding query (0) may attend every real key (as
  before packing: its output is unused, and this keeps an unpacked row's numbers as they
  were)."""
  query_ids, key_ids = input_mask[:, None, :, None], input_mask[:, None, None, :]
  return (key_ids > 0) & ((query_ids == key_ids) | (query_ids == 0))


def document_bias(input_mask: jax.Array, dtype: Any) -> jax.Array:
  """`document_allowed` as an additive bias [B, 1, T, T]: 0 where allowed, a large negative
  elsewhere. On an unpacked row (1 ... 1 0 ... 0) it equals `bias_from_mask` broadcast."""
  big_negative = jnp.finfo(dtype).min / 2
  return jnp.where(document_allowed(input_mask), 0.0, big_negative).astype(dtype)


def xla_attention(query, key, value, input_mask, *, dropout_rng, dropout_rate: float,
                  deterministic: bool, dtype, causal: str = "none", window=None) -> jax.Array:
  """softmax(Q K^T / sqrt(D) + document/padding (and causal, and window) bias) V in plain XLA
  ops (flax's `dot_product_attention`), with dropout on the attention probabilities. A query
  attends only the real keys of its own document (`document_allowed`); in a windowed layer, a
  query that may attend no key at all (a padding position farther than half a window from every
  real token, e.g. a ColBERT query's [MASK] expansion) gets a zero output, as PyTorch's
  scaled-dot-product attention gives such a row (so transformers' ModernBERT agrees with these
  positions too). (Without a window only a causal side can leave a padding query without keys;
  such outputs are never read and keep the average of the masked keys.)"""
  bias = document_bias(input_mask, dtype)  # [B, 1, T, T]
  allowed = causal_allowed(query.shape[1], causal)
  if allowed is not None:
    bias = bias + jnp.where(jnp.asarray(allowed), 0.0, jnp.finfo(dtype).min / 2).astype(dtype)
  out = None
  if window is not None:
    local = local_window_allows(query.shape[1], window_scalar(window))
    bias = bias + jnp.where(local, 0.0, jnp.finfo(dtype).min / 2).astype(dtype)
    # Only a window can leave a query without any key (a global layer always lets a query see
    # its document's real keys, or, for padding, every real key).
    some = document_allowed(input_mask)[:, 0] & local[None]  # [B, T, T]
    if allowed is not None:
      some = some & jnp.asarray(allowed)[None]
    out = jnp.any(some, axis=-1)[:, :, None, None].astype(dtype)  # [B, T, 1, 1]
  result = nn.dot_product_attention(
      query, key, value, bias=bias, dropout_rng=dropout_rng,
      dropout_rate=dropout_rate, broadcast_dropout=False, deterministic=deterministic,
      dtype=dtype)
  return result if out is None else result * out


def _no_dropout(name: str, dropout_rate: float, deterministic: bool) -> None:
  if dropout_rate > 0 and not deterministic:
    raise ElectraError(f"model.attention={name!r} has no attention dropout; set "
                       "--config.model.attention_dropout_prob=0 or use attention 'xla'")


def cudnn_attention(query, key, value, input_mask, *, dropout_rng, dropout_rate: float,
                    deterministic: bool, dtype, causal: str = "none", window=None) -> jax.Array:
  """cuDNN fused attention (GPU, bfloat16/float16); padded keys excluded by key lengths (the
  real tokens of each row), "ltr" as cuDNN's causal mask, "rtl" as an explicit [1, 1, T, T]
  mask. Key lengths cannot keep packed documents apart: `resolve(..., packed=True)` refuses
  this implementation."""
  del dropout_rng
  _no_dropout("cudnn", dropout_rate, deterministic)
  _no_window("cudnn", window)
  lengths = jnp.sum(input_mask > 0, axis=-1).astype(jnp.int32)
  allowed = causal_allowed(query.shape[1], causal)
  mask = jnp.asarray(allowed)[None, None] if causal == "rtl" else None
  return jax.nn.dot_product_attention(
      query.astype(dtype), key.astype(dtype), value.astype(dtype), mask=mask,
      is_causal=causal == "ltr", key_value_seq_lengths=lengths, implementation="cudnn")


def _splash_head_mask(masks, seq_len: int, causal: str, window: int):
  """One head's splash mask over (query, key) [T, T]: the `causal` direction and, for
  window > 0, the band |i - j| <= window // 2 (`local_window_allows`) as the kernel's
  `LocalMask` with window_size (left, right) keys, the "ltr" / "rtl" side cut to 0. The local
  mask is sparse: the kernel skips the [block, block] tiles outside the band and masks inside
  the tiles it cuts, so any window works with any block size."""
  if window > 0:
    half = window // 2
    left, right = (0 if causal == "rtl" else half), (0 if causal == "ltr" else half)
    return masks.LocalMask((seq_len, seq_len), window_size=(left, right), offset=0)
  if causal == "ltr":
    return masks.CausalMask((seq_len, seq_len))
  if causal == "rtl":
    return masks.NumpyMask(causal_allowed(seq_len, "rtl"))
  return masks.FullMask((seq_len, seq_len))


def _splash_kernel(num_heads: int, seq_len: int, interpret: bool, causal: str = "none",
                   window: int = 0):
  """A splash kernel for one [N, T, D] example (`window` tokens, 0: global), built per trace:
  it holds its mask metadata as arrays, which a kernel cached across traces (a scan over
  layers, jit) would leak as tracers."""
  from jax.experimental.pallas.ops.tpu.splash_attention import (  # pylint: disable=import-outside-toplevel
      splash_attention_kernel as splash, splash_attention_mask as masks)
  block = min(seq_len, 512) if seq_len % 512 == 0 else SPLASH_BLOCK
  sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block,
                            block_q_dkv=block, block_kv_dkv=block, block_kv_dkv_compute=block,
                            block_q_dq=block, block_kv_dq=block)
  mask = masks.MultiHeadMask([_splash_head_mask(masks, seq_len, causal, window)] * num_heads)
  kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1,
                                  interpret=interpret)
  return kernel, splash.SegmentIds


def _splash_interpret(mesh) -> bool:
  """Whether splash runs in Pallas's interpreter: yes unless the step is compiled for TPUs.

  With a mesh in context (a `jax.sharding.Mesh` or the `AbstractMesh` that
  `jax.sharding.get_abstract_mesh()` returns under `jax.set_mesh`), the platform of the mesh's
  devices decides, so a TPU slice compiled for on a CPU host gets the real Mosaic kernel; with
  no mesh (or an abstract one that names no device), JAX's default backend decides.
  """
  if isinstance(mesh, jax.sharding.Mesh):
    mesh = mesh.abstract_mesh
  device = None if mesh is None or mesh.empty else getattr(mesh, "abstract_device", None)
  platform = getattr(device, "platform", None) or jax.default_backend()
  return platform != "tpu"


def _splash_local(query, key, value, segments, *, dtype, interpret: bool,
                  causal: str = "none", window: int = 0) -> jax.Array:
  """Splash attention on the arrays one device holds (or on global arrays with no mesh).

  query, key, value: [B, T, N, D]; segments: int32 [B, T] (document ids, 0 padding) ->
  [B, T, N, D].
  One kernel call per example (vmap), each over all N heads as [N, T, D]; `window` tokens
  (0: global).
  """
  _, seq_len, num_heads, head_size = query.shape
  kernel, segment_ids = _splash_kernel(num_heads, seq_len, interpret, causal, window)
  scale = 1.0 / jnp.sqrt(jnp.float32(head_size)).astype(dtype)
  # [B, T, N, D] -> [B, N, T, D], one kernel call per example.
  q, k, v = (jnp.swapaxes(x.astype(dtype), 1, 2) for x in (query * scale, key, value))
  out = jax.vmap(lambda q1, k1, v1, s1: kernel(q1, k1, v1, segment_ids(q=s1, kv=s1)))(
      q, k, v, segments)
  return jnp.swapaxes(out, 1, 2)


def _mesh_axes(name: str, mesh) -> tuple[str, ...]:
  """The mesh axes (of size > 1) the logical axis `name` maps to under the active rules
  (`nn.logical_axis_rules`; none active: no axes)."""
  spec = nn.logical_to_mesh_axes((name,))
  entry = spec[0] if len(spec) else None
  axes = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
  return tuple(a for a in axes if a in mesh.shape and mesh.shape[a] > 1)


def _shard_count(mesh, axes: tuple[str, ...]) -> int:
  """How many pieces the mesh axes `axes` split a dimension into (1 for none)."""
  return int(np.prod([mesh.shape[a] for a in axes], dtype=np.int64))


def _splash_specs(mesh, batch_size: int, num_heads: int) -> tuple[PartitionSpec, PartitionSpec]:
  """shard_map specs of splash attention on `mesh`: (query/key/value/context [B, T, N, D],
  segments [B, T]).

  B is split over the mesh axes of the logical "batch" axis and N over those of "heads"; T and D
  stay whole on every device. A batch those axes do not divide (parameter init's one example:
  shapes only) is not split. ElectraError when the head axes do not divide the N heads.
  """
  batch_axes, head_axes = _mesh_axes("batch", mesh), _mesh_axes("heads", mesh)
  if batch_size % _shard_count(mesh, batch_axes):
    batch_axes = ()
  head_shards = _shard_count(mesh, head_axes)
  if num_heads % head_shards:
    raise ElectraError(f"model.attention='splash' splits the {num_heads} attention heads over "
                       f"mesh axes {head_axes} of size {head_shards}, which does not divide "
                       "them; change --config.mesh.tensor (or map 'heads' to None in "
                       "--config.mesh.logical_axis_rules), or use attention 'xla'")
  batch_spec = batch_axes or None
  return (PartitionSpec(batch_spec, None, head_axes or None, None),
          PartitionSpec(batch_spec, None))


def _static_window(window) -> int:
  """A window given as None or an int as a Python int (0: global attention). ElectraError for
  a traced scalar: the kernel's mask is built before tracing, so a window chosen per scanned
  layer comes as a `Window`."""
  if window is None:
    return 0
  try:
    return max(int(window), 0)
  except jax.errors.JAXTypeError as e:
    raise ElectraError("model.attention='splash' builds its mask before tracing: give the "
                       "window as a Python int, or as attention.Window(size, local) when "
                       "whether the layer is local is traced, not as a traced scalar") from e


def _splash_attend(query, key, value, segments, *, dtype, causal: str, window: int
                   ) -> jax.Array:
  """Splash attention with a static `window` (0: global): query, key, value [B, T, N, D],
  segments int32 [B, T] -> [B, T, N, D]; in `jax.shard_map` under a mesh of several devices
  (`_splash_specs`), on the global arrays otherwise."""
  batch_size, _, num_heads, _ = query.shape
  mesh = jax.sharding.get_abstract_mesh()
  local = functools.partial(_splash_local, dtype=dtype, interpret=_splash_interpret(mesh),
                            causal=causal, window=window)
  if mesh.empty or mesh.size == 1:
    return local(query, key, value, segments)
  qkv_spec, segment_spec = _splash_specs(mesh, batch_size, num_heads)
  return jax.shard_map(local, mesh=mesh, in_specs=(qkv_spec, qkv_spec, qkv_spec, segment_spec),
                       out_specs=qkv_spec, check_vma=False)(query, key, value, segments)


def splash_attention(query, key, value, input_mask, *, dropout_rng, dropout_rate: float,
                     deterministic: bool, dtype, causal: str = "none", window=None) -> jax.Array:
  """The Pallas TPU splash-attention kernel: query, key, value [B, T, N, D], input_mask int
  [B, T] -> context [B, T, N, D]. The document ids (input_mask: k >= 1 the k-th document of a
  packed row, 0 padding) are the kernel's segment ids for queries and keys alike, so a real
  query sees only the keys of its own document (and a padding query only padding). T must be
  a multiple of 128; no attention dropout.

  `window` (None / 0: global; a Python int; or a `Window`) is the kernel's `LocalMask`
  (`_splash_head_mask`), combined with the causal direction and the padding's segment ids.
  A `Window`, whose "is local" flag is traced (scanned modern layers), builds both kernels,
  local and global, and `lax.cond` runs the one the flag picks: one kernel's work per layer
  and two kernels' code (and mask metadata). Under differentiation the two branches save
  residuals of the same shapes (q, k, v, output, log-sum-exp), which JAX's cond shares, so
  the saved activations are one kernel's. (Under a `vmap` over layers, not used here, a cond
  would run both.)

  A Mosaic kernel cannot be partitioned by XLA, so under a mesh of more than one device (the
  sharded train step: `jax.set_mesh` and `nn.logical_axis_rules`) it runs inside
  `jax.shard_map`: each device attends over its own examples (the mesh axes of the logical
  "batch" axis) and its own heads (those of "heads"), with the whole sequence; see
  `_splash_specs`. With no mesh it calls the kernel on the global arrays. Pallas's interpreter
  stands in for the kernel unless the mesh's devices (no mesh: JAX's default backend) are TPUs.
  """
  del dropout_rng
  _no_dropout("splash", dropout_rate, deterministic)
  seq_len = query.shape[1]
  if seq_len % SPLASH_BLOCK:
    raise ElectraError(f"model.attention='splash' needs a sequence length that is a multiple "
                       f"of {SPLASH_BLOCK}, not {seq_len}; change data.max_seq_length or use "
                       "attention 'xla'")
  segments = input_mask.astype(jnp.int32)
  check_causal(causal)
  attend = functools.partial(_splash_attend, dtype=dtype, causal=causal)
  if not isinstance(window, Window):
    return attend(query, key, value, segments, window=_static_window(window))
  size = _static_window(window.size)
  if isinstance(window.local, (bool, np.bool_)):  # Known before tracing: one kernel.
    return attend(query, key, value, segments, window=size if window.local else 0)
  return jax.lax.cond(jnp.asarray(window.local, bool),
                      functools.partial(attend, window=size),
                      functools.partial(attend, window=0),
                      query, key, value, segments)


# model.attention -> implementation ("auto" is resolved by `resolve`).
IMPLEMENTATIONS: dict[str, AttentionFn] = {
    "xla": xla_attention,
    "cudnn": cudnn_attention,
    "splash": splash_attention,
}
CHOICES = ("auto", *IMPLEMENTATIONS)


def check_name(name: str) -> None:
  """ElectraError listing the choices when `name` is not one."""
  if name not in CHOICES:
    close = difflib.get_close_matches(name, CHOICES, n=1)
    raise ElectraError(f"model.attention={name!r} is not an attention implementation"
                       + (f" (did you mean {close[0]!r}?)" if close else "")
                       + f"; choose one of {', '.join(CHOICES)}")


def resolve(name: str, *, dropout_rate: float, dtype: Any, seq_len: int | None = None,
            platform: str | None = None, windowed: bool = False,
            packed: bool | None = False) -> str:
  """The implementation `name` stands for on `platform` (default: JAX's backend).

  "auto" -> "cudnn" on a GPU with 16-bit compute, "splash" on a TPU when the sequence length
  is a multiple of 128, "xla" otherwise, and "xla" whenever attention dropout is on or some
  layer attends within a window (`windowed`: the modern block's local layers) or, on a GPU,
  the rows may be packed (`packed`: True, several documents per row, which cuDNN's key lengths
  cannot keep apart; None, not said (`EncoderConfig.packed`'s default), counts as may be;
  False: one document a row). An explicit "splash" takes windows and packed rows. An explicit
  fused choice that cannot run (attention dropout, a window or rows that may be packed for
  cuDNN, a float32 cuDNN, no GPU) is an ElectraError naming the fix.
  """
  check_name(name)
  platform = platform or jax.default_backend()
  sixteen_bit = jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
  if name == "auto":
    if dropout_rate > 0 or windowed:  # Windowed: cuDNN takes none; splash only when named.
      return "xla"
    if platform == "gpu" and sixteen_bit and packed is False:
      return "cudnn"
    if platform == "tpu" and (seq_len is None or seq_len % SPLASH_BLOCK == 0):
      return "splash"
    return "xla"
  if name in FUSED and dropout_rate > 0:
    raise ElectraError(f"model.attention={name!r} has no attention dropout but "
                       f"attention_dropout_prob={dropout_rate}; set it to 0 (the fused kernels "
                       "cannot drop attention probabilities) or use attention 'xla' or 'auto'")
  if name == "cudnn":
    if packed is None:
      raise ElectraError("model.attention='cudnn' needs rows of one document each, and this "
                         "encoder's config does not say whether its rows are packed "
                         "(EncoderConfig.packed=None); build it with packed=False for unpacked "
                         "rows (electra.encoder_configs(..., packed=False)), or use attention "
                         "'xla' or 'auto'")
    if packed:
      raise ElectraError("model.attention='cudnn' cannot keep the documents of a packed row "
                         "apart (jax.nn.dot_product_attention takes no segment ids); with "
                         "data.packing use attention 'xla' (or 'auto'), or 'splash' on a TPU")
    if windowed:
      raise ElectraError("model.attention='cudnn' has no local-attention window yet; with "
                         "model.architecture='modern' use attention 'splash' (TPU), 'xla' or "
                         "'auto' (or make every layer global: "
                         "model.global_attn_every_n_layers=1)")
    if platform != "gpu":
      raise ElectraError(f"model.attention='cudnn' needs an NVIDIA GPU (this run's devices are "
                         f"{platform}); use 'auto' or 'xla'")
    if not sixteen_bit:
      raise ElectraError("model.attention='cudnn' computes in bfloat16 or float16; set "
                         "--config.model.dtype=bfloat16 or use attention 'xla'")
  return name


def get_attention(name: str) -> AttentionFn:
  """The implementation called `name` (after `resolve`); ElectraError for unknown names."""
  check_name(name)
  if name == "auto":
    raise ElectraError("model.attention='auto' must be resolved first (attention.resolve)")
  return IMPLEMENTATIONS[name]
