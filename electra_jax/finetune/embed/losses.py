"""The `embed` family's contrastive losses: pure float32 functions of L2-normalised embeddings.

A training batch holds B rows of S texts each: the anchor (column 0), its positive (column 1)
and K = S - 2 hard negatives (columns 2..), embedded as float32 [B, S, D] unit vectors, with
`text_ids` int [B, S]: equal ids for equal texts (their token ids), so that a text that occurs
twice in a batch is never a negative of itself.

  infonce_losses  in-batch negatives plus hard negatives (sentence-transformers'
                  MultipleNegativesRankingLoss): anchor i against every positive and hard negative
                  of the batch, logits = scale * cosine, cross-entropy towards its own positive;
                  symmetric: also positive i against every anchor (the mean of both directions).
  cosent_loss     scored pairs (CoSENT, sentence-transformers' CoSENTLoss): log(1 + sum over the
                  pairs (i, j) with score_i > score_j of exp(scale * (cos_j - cos_i))).
  distill         a teacher's scores of each anchor's own candidates (positive and hard
                  negatives; sentence-transformers' DistillKLDivLoss): the KL divergence from
                  softmax(teacher / t) to softmax(cosine / t), times t^2 (`late.kl_losses`)
  matryoshka      a loss summed over nested prefixes of the embedding (each prefix re-normalised),
                  as sentence-transformers' MatryoshkaLoss with equal weights.

Every function takes the whole (global) batch: under `jax.jit` on a mesh the batch arrays are
sharded over the devices and the similarity matrix is computed over the whole batch, so the
negatives of a row come from every device and host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from electra_jax.finetune.embed import late
from electra_jax.finetune.embed import model as model_lib

LOSSES = ("infonce", "cosent", "distill")  # config.loss choices.
DEFAULT_SCALE = 20.0  # config.scale: logits are scale * cosine (sentence-transformers' 20).


def infonce_losses(embeddings: jax.Array, text_ids: jax.Array, scale: float = DEFAULT_SCALE,
                   symmetric: bool = False) -> tuple[jax.Array, jax.Array]:
  """InfoNCE with in-batch and hard negatives.

  Args:
    embeddings: float [B, S, D] unit vectors: anchor, positive, S - 2 hard negatives per row.
    text_ids: int [B, S]; equal ids are equal texts.
    scale: logits are scale * cosine (an inverse temperature).
    symmetric: also each positive against every anchor of the batch; each row's loss is then
      the mean of the two directions.

  Returns:
    (float32 [B] each row's loss, float32 [B] 1.0 where the anchor's positive scored highest
    of its candidates). Anchor i's candidates are the B positives and B x (S - 2) hard
    negatives of the batch, less every candidate other than its own positive whose text equals
    that positive's (a duplicate in another row, or a hard negative equal to it); in the
    symmetric direction positive i's candidates are the B anchors, less the other copies of its
    own anchor's text.
  """
  embeddings = embeddings.astype(jnp.float32)
  batch, texts = embeddings.shape[:2]
  anchors, positives = embeddings[:, 0], embeddings[:, 1]
  candidates = embeddings[:, 1:].reshape(batch * (texts - 1), -1)  # Row i's are i*(S-1)...
  candidate_ids = text_ids[:, 1:].reshape(-1)
  target = jnp.arange(batch) * (texts - 1)
  columns = jnp.arange(candidates.shape[0])
  masked = ((candidate_ids[None, :] == text_ids[:, 1:2])
            & (columns[None, :] != target[:, None]))  # [B, B(S-1)]
  losses, correct = late.masked_cross_entropy(scale * anchors @ candidates.T, target, masked)
  if not symmetric:
    return losses, correct
  rows = jnp.arange(batch)
  masked_back = (text_ids[None, :, 0] == text_ids[:, 0:1]) & (rows[None, :] != rows[:, None])
  back, _ = late.masked_cross_entropy(scale * positives @ anchors.T, rows, masked_back)
  return (losses + back) / 2.0, correct


def cosent_loss(embeddings: jax.Array, scores: jax.Array, scale: float = DEFAULT_SCALE
                ) -> jax.Array:
  """CoSENT: float32 [] log(1 + sum_{i, j: score_i > score_j} exp(scale * (cos_j - cos_i))).

  Args:
    embeddings: float [B, S >= 2, D] unit vectors; each row's pair is columns 0 and 1.
    scores: float [B] the pairs' similarity scores (any scale: only their order counts).
    scale: multiplies the cosine differences.
  """
  embeddings = embeddings.astype(jnp.float32)
  cosine = jnp.sum(embeddings[:, 0] * embeddings[:, 1], axis=-1)  # [B]
  differences = scale * (cosine[None, :] - cosine[:, None])  # [i, j]: scale (cos_j - cos_i)
  ordered = scores[:, None] > scores[None, :]
  terms = jnp.where(ordered, differences, -jnp.inf).reshape(-1)
  return jax.nn.logsumexp(jnp.concatenate([jnp.zeros((1,), jnp.float32), terms]))


def prefix(embeddings: jax.Array, dim: int) -> jax.Array:
  """The first `dim` components of float [..., D] embeddings, re-normalised to unit length."""
  return model_lib.normalize(embeddings[..., :dim])


def matryoshka(loss: Callable[[jax.Array], jax.Array], embeddings: jax.Array,
               dims: Sequence[int]) -> jax.Array:
  """sum over `dims` of loss(prefix(embeddings, d)) (equal weights, MatryoshkaLoss's default);
  `dims` empty: loss(embeddings)."""
  if not dims:
    return loss(embeddings)
  return sum(loss(prefix(embeddings, int(d))) for d in dims)


@dataclasses.dataclass(frozen=True)
class Objective:
  """The loss a run trains with (config.loss, scale, symmetric, matryoshka_dims, vectors,
  maxsim_scale, distill_temperature).

  Attributes:
    loss: one of `LOSSES`.
    scale: single vectors: logits are scale * cosine.
    symmetric: infonce in both directions (single vectors).
    dims: the Matryoshka prefixes the loss is summed over; (): the whole embedding.
    vectors: "single" (one unit vector a text) or "multi" (ColBERT: one a token, MaxSim).
    maxsim_scale: multi-vector infonce: logits are maxsim_scale * MaxSim.
    temperature: distill: divides the student's and the teacher's scores before softmax.
    min_max: distill: each row's student scores first scaled to [0, 1] (PyLate's).
  """
  loss: str = "infonce"
  scale: float = DEFAULT_SCALE
  symmetric: bool = False
  dims: tuple[int, ...] = ()
  vectors: str = "single"
  maxsim_scale: float = late.MAXSIM_SCALE
  temperature: float = 1.0
  min_max: bool = False

  def __call__(self, embeddings: jax.Array, text_ids: jax.Array,
               scores: jax.Array | None = None, score_mask: jax.Array | None = None,
               teacher: jax.Array | None = None) -> tuple[jax.Array, jax.Array | None]:
    """(float32 [] the batch's loss, float32 [B] 1.0 where the anchor's positive is its
    nearest candidate (infonce; distill: where the student's best candidate is the
    teacher's), on the whole embedding; None for cosent).

    The batch's loss: infonce the mean over rows of `infonce_losses` (multi:
    `late.contrastive_losses`), cosent `cosent_loss`, distill the mean of `late.kl_losses`;
    summed over the Matryoshka prefixes (`matryoshka`).

    Args:
      embeddings: float [B, S, D] unit vectors (see `infonce_losses`); multi: float
        [B, S, T, D] unit token vectors.
      text_ids: int [B, S]: equal ids, equal texts.
      scores: float [B] the pairs' scores (cosent).
      score_mask: multi: int [B, S, T], non-zero where a token vector is scored.
      teacher: distill: float [B, S - 1], the teacher's score of each candidate.
    """
    if self.loss not in LOSSES:
      raise ValueError(f"loss={self.loss!r}; choose one of {', '.join(LOSSES)}")
    if self.vectors == "multi":
      if self.loss == "distill":
        losses, agree = late.distill_losses(embeddings, score_mask, teacher, self.temperature,
                                            self.min_max)
        return jnp.mean(losses), agree
      losses, correct = late.contrastive_losses(embeddings, score_mask, text_ids,
                                                self.maxsim_scale)
      return jnp.mean(losses), correct
    if self.loss == "cosent":
      return matryoshka(lambda e: cosent_loss(e, scores, self.scale), embeddings,
                        self.dims), None
    if self.loss == "distill":
      def distill(e):
        cosine = jnp.einsum("bd,bcd->bc", e[:, 0].astype(jnp.float32),
                            e[:, 1:].astype(jnp.float32))
        return late.kl_losses(cosine, teacher, self.temperature, self.min_max)
      losses, agree = distill(embeddings)
      if not self.dims:
        return jnp.mean(losses), agree
      return matryoshka(lambda e: jnp.mean(distill(e)[0]), embeddings, self.dims), agree
    infonce = lambda e: infonce_losses(e, text_ids, self.scale, self.symmetric)
    losses, correct = infonce(embeddings)
    if not self.dims:
      return jnp.mean(losses), correct
    return matryoshka(lambda e: jnp.mean(infonce(e)[0]), embeddings, self.dims), correct


def parse_dims(value: str | Sequence[int]) -> tuple[int, ...]:
  """config.matryoshka_dims ("768,256,64", "" for none) -> (768, 256, 64).

  Raises:
    ValueError: a part that is not a positive integer, or a dimension named twice.
  """
  if isinstance(value, str):
    parts = [p.strip() for p in value.split(",") if p.strip()]
  else:
    parts = [str(p) for p in value]
  dims = []
  for part in parts:
    if not part.isdigit() or int(part) < 1:
      raise ValueError(f"{part!r} is not a positive whole number of dimensions")
    dims.append(int(part))
  if len(set(dims)) != len(dims):
    raise ValueError(f"a dimension is named twice in {','.join(map(str, dims))}")
  return tuple(dims)
