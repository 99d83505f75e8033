"""The `embed` family's model inputs: the rows (read by `finetune.shared.rows`, whose names
this module also gives) as token ids, one `[CLS] text [SEP]` a text, or laid out as ColBERT
queries and documents (`late.Layout`).

  rows = read_rows("train.jsonl", Fields("query", "passage", ("negative",)))
  features = featurize(rows, tokenizer, max_seq_length=128)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.finetune.embed import late
from electra_jax.finetune.embed import model as model_lib
# The rows' readers (`finetune.shared.rows`), under the names this module has always given them.
from electra_jax.finetune.shared.rows import (  # pylint: disable=unused-import
    EXTENSIONS, FORMATS, Fields, Rows, file_format, json_objects, parse_fields, read_rows,
    read_text, text_lines)


# --------------------------------------------------------------------------------------------
# Model inputs.


@dataclasses.dataclass
class Features:
  """A file's rows as model inputs.

  Attributes:
    input_ids: int32 [N, S, T]: `[CLS] text [SEP]` of each row's S texts (anchor, positive,
      hard negatives), padded with the tokenizer's pad id (multi-vector: the anchor laid out
      as a ColBERT query, the others as documents, `late.Layout`).
    input_mask: int8 [N, S, T]: 1 on each text's tokens (the positions attended to).
    text_ids: int32 [N, S]: one id per distinct text (its token ids), 0 .. U - 1.
    scores: float32 [N], or None without scores.
    texts: [U]: the text of each id (the first one with those tokens).
    score_mask: multi-vector: int8 [N, S, T], 1 on the positions whose vectors are scored (a
      query's expansion too); None for single vectors.
    teacher_scores: float32 [N, S - 1] a teacher's scores of the candidates, or None.
  """
  input_ids: np.ndarray
  input_mask: np.ndarray
  text_ids: np.ndarray
  scores: np.ndarray | None
  texts: list[str]
  score_mask: np.ndarray | None = None
  teacher_scores: np.ndarray | None = None

  def arrays(self) -> dict[str, np.ndarray]:
    """The per-row arrays `finetune.batches.train_batches` draws (scores only when scored;
    score_mask for multi-vector rows; teacher_scores with a teacher)."""
    out = {"input_ids": self.input_ids, "input_mask": self.input_mask,
           "text_ids": self.text_ids}
    if self.scores is not None:
      out["scores"] = self.scores
    if self.score_mask is not None:
      out["score_mask"] = self.score_mask
    if self.teacher_scores is not None:
      out["teacher_scores"] = self.teacher_scores
    return out


def featurize(rows: Rows, tokenizer: tokenizer_lib.SubwordTokenizer, max_seq_length: int,
              layout: late.Layout | None = None) -> Features:
  """The rows' texts as `[CLS] text [SEP]` inputs cut to max_seq_length tokens, and their ids
  (equal token ids, equal id). With a ColBERT `layout`: the anchors as queries, the others as
  documents (`late.Layout`), T = max(query_length, max_seq_length); cut texts are counted in
  a warning."""
  columns = 2 + len(rows.negatives[0])
  flat = [text for i in range(len(rows))
          for text in (rows.anchors[i], rows.positives[i], *rows.negatives[i])]
  score_mask = None
  if layout is None:
    inputs = model_lib.text_inputs(tokenizer, flat, max_seq_length)
    width = max_seq_length
  else:
    width = max(layout.query_length, layout.max_seq_length)
    queries, cut_queries = layout.queries(tokenizer, rows.anchors, width)
    others = [text for i in range(len(rows)) for text in (rows.positives[i], *rows.negatives[i])]
    documents, cut_documents = layout.documents(tokenizer, others, width)
    late.warn_cut(f"queries of {rows.path}", cut_queries, len(rows),
                  f"query_length={layout.query_length} tokens")
    late.warn_cut(f"documents of {rows.path}", cut_documents, len(others),
                  f"max_seq_length={layout.max_seq_length} tokens")
    inputs = {}
    for key in ("input_ids", "input_mask", "score_mask"):
      q = queries[key].reshape(len(rows), 1, width)
      d = documents[key].reshape(len(rows), columns - 1, width)
      inputs[key] = np.concatenate([q, d], axis=1).reshape(len(rows) * columns, width)
    score_mask = inputs["score_mask"].astype(np.int8).reshape(len(rows), columns, width)
  _, first, inverse = np.unique(inputs["input_ids"], axis=0, return_index=True,
                                return_inverse=True)
  shape = (len(rows), columns, width)
  return Features(input_ids=inputs["input_ids"].reshape(shape),
                  input_mask=inputs["input_mask"].astype(np.int8).reshape(shape),
                  text_ids=np.asarray(inverse, np.int32).reshape(len(rows), columns),
                  scores=rows.scores, texts=[flat[i] for i in first], score_mask=score_mask,
                  teacher_scores=rows.teacher_scores)
