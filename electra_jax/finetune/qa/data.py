"""SQuAD data: questions read from the official JSON files or tfds, and sliding-window features.

Sources (`read_split`):

* the official files under a data directory: train-v1.1.json / dev-v1.1.json (SQuAD 1.1) and
  train-v2.0.json / dev-v2.0.json (SQuAD 2.0), as https://rajpurkar.github.io/SQuAD-explorer/
  serves them: {"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
  "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]};
* TensorFlow Datasets `squad/v1.1` and `squad/v2.0`, prepared beforehand (`tfds build squad`).

Both give `Question`s. Featurization (`featurize`) differs from the original ELECTRA code in one
way on purpose: the context is tokenized as a whole with character offsets
(`SubwordTokenizer.encode_with_offsets`), not word by word after a whitespace split, so an answer
maps to tokens and a predicted span maps back to the exact characters of the context, for
sentencepiece and WordPiece alike, whatever the whitespace, accents or punctuation. Everything
else is the original's (finetune/qa/qa_tasks.py): the question truncated to `max_query_length`
tokens; [CLS] question [SEP] window [SEP] with segment ids 0 then 1; windows of at most
`max_seq_length - len(question) - 3` context tokens starting every `doc_stride` tokens; a token
scored in the window where it has the most context (min(left, right) + 0.01 x window length);
training labels at the answer's first and last token, or [CLS] (position 0) when the window
does not hold the whole answer or the question has none; the answerability label is the
question's (not the window's).

Problems in the data are one-line errors when the file cannot be SQuAD at all (not JSON, no
"data" list, a question without an id or text, duplicate ids, SQuAD 2.0 questions in a 1.1 task)
and counted, logged skips otherwise (a paragraph without context; a training answer whose
offset does not point at its text in the context; an answer on no token). An answer whose text
starts or ends inside a token is trained on the tokens that cover it and counted
(`FeatureStats.widened_answers`): the exact text cannot be predicted there.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from typing import Any, Iterable, Sequence

from absl import logging
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared.windows import (  # pylint: disable=unused-import
    max_context_windows, window_starts)

TASKS = ("squad1", "squad2")
# The official file names per task and split.
FILES = {("squad1", "train"): "train-v1.1.json", ("squad1", "dev"): "dev-v1.1.json",
         ("squad2", "train"): "train-v2.0.json", ("squad2", "dev"): "dev-v2.0.json"}
TFDS_NAMES = {"squad1": "squad/v1.1", "squad2": "squad/v2.0"}
SPLITS = ("train", "dev")
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")
_MAX_LOGGED = 5  # Skips of one kind logged one by one; the rest are counted.


@dataclasses.dataclass(frozen=True)
class Answer:
  """A gold answer: its text and the character offset of that text in the context."""
  text: str
  start: int


@dataclasses.dataclass(frozen=True)
class Question:
  """One SQuAD question with its context.

  `answers` holds every gold answer (one in train files, several in dev files); it is empty for
  a SQuAD 2.0 question without an answer (`is_impossible`). `context_id` is shared by the
  questions of one paragraph (their context is tokenized once).
  """
  qid: str
  question: str
  context: str
  answers: tuple[Answer, ...]
  is_impossible: bool
  context_id: int
  title: str = ""


@dataclasses.dataclass
class ReadStats:
  """What `questions_from_articles` skipped, by reason."""
  questions: int = 0
  skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def check_task(task: str) -> str:
  if task not in TASKS:
    raise ElectraError(f"task={task!r} is not a SQuAD task; use --config.task=squad1 (SQuAD 1.1) "
                       "or --config.task=squad2 (SQuAD 2.0)")
  return task


def _log_skip(stats: ReadStats, reason: str, detail: str) -> None:
  stats.skipped[reason] += 1
  if stats.skipped[reason] <= _MAX_LOGGED:
    logging.warning("Skipped (%s): %s", reason, detail)


def questions_from_articles(articles: Any, task: str, split: str, where: str
                            ) -> tuple[list[Question], ReadStats]:
  """The questions of a SQuAD "data" list (`where` names the source in errors).

  Raises:
    ElectraError: the structure is not SQuAD's, an id repeats, a question lacks its id or
      text, or (task squad1) a question is marked is_impossible.
  """
  hint = ("it is not a SQuAD file: SQuAD's JSON is {\"data\": [{\"title\", \"paragraphs\": "
          "[{\"context\", \"qas\": [{\"id\", \"question\", \"answers\"}]}]}]}")
  if not isinstance(articles, list):
    raise ElectraError(f"{where}: \"data\" is not a list; {hint}")
  questions: list[Question] = []
  stats = ReadStats()
  seen: set[str] = set()
  context_id = 0
  for a, article in enumerate(articles):
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
      raise ElectraError(f"{where}: article {a} has no \"paragraphs\" list; {hint}")
    for p, paragraph in enumerate(article["paragraphs"]):
      if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
        raise ElectraError(f"{where}: article {a} paragraph {p} has no \"qas\" list; {hint}")
      context = paragraph.get("context")
      if not isinstance(context, str) or not context.strip():
        for qa in paragraph["qas"]:
          _log_skip(stats, "no context", f"{where}: question {qa.get('id')!r} (article {a} "
                    f"paragraph {p}) has an empty or missing context")
        continue
      context_id += 1
      for qa in paragraph["qas"]:
        question = _question(qa, context, context_id, str(article.get("title", "")), task,
                             split, where, hint, stats)
        if question is None:
          continue
        if question.qid in seen:
          raise ElectraError(f"{where}: question id {question.qid!r} appears twice; SQuAD ids "
                             "are unique (the predictions file is keyed by them)")
        seen.add(question.qid)
        questions.append(question)
  stats.questions = len(questions)
  return questions, stats


def _question(qa: Any, context: str, context_id: int, title: str, task: str, split: str,
              where: str, hint: str, stats: ReadStats) -> Question | None:
  if not isinstance(qa, dict) or not isinstance(qa.get("id"), str) or not qa["id"]:
    raise ElectraError(f"{where}: a question has no \"id\" string ({str(qa)[:80]}); {hint}")
  qid = qa["id"]
  text = qa.get("question")
  if not isinstance(text, str):
    raise ElectraError(f"{where}: question {qid!r} has no \"question\" text; {hint}")
  if not text.strip():
    _log_skip(stats, "empty question", f"{where}: question {qid!r} has an empty text")
    return None
  impossible = bool(qa.get("is_impossible", False))
  if impossible and task == "squad1":
    raise ElectraError(f"{where}: question {qid!r} is marked is_impossible, which SQuAD 1.1 "
                       "has not: this is a SQuAD 2.0 file; use --config.task=squad2")
  raw = qa.get("answers", [])
  if not isinstance(raw, list):
    raise ElectraError(f"{where}: question {qid!r} has \"answers\" that is not a list; {hint}")
  answers = []
  for answer in raw:
    if (not isinstance(answer, dict) or not isinstance(answer.get("text"), str)
        or not isinstance(answer.get("answer_start"), int)):
      raise ElectraError(f"{where}: question {qid!r} has an answer without a \"text\" string "
                         f"and an integer \"answer_start\" ({str(answer)[:80]}); {hint}")
    answers.append(Answer(answer["text"], answer["answer_start"]))
  if impossible:
    answers = []
  elif not answers:
    if task == "squad1" or split == "train":
      _log_skip(stats, "no answer", f"{where}: question {qid!r} has no answer and is not "
                "marked is_impossible")
      return None
  if split == "train" and answers:
    first = answers[0]
    if context[first.start:first.start + len(first.text)] != first.text:
      _log_skip(stats, "answer offset does not match the context",
                f"{where}: question {qid!r}: answer {first.text!r} is not at character "
                f"{first.start} of its context (found "
                f"{context[first.start:first.start + len(first.text)]!r})")
      return None
    answers = [first]  # The original trains on the first answer only.
  return Question(qid=qid, question=text, context=context, answers=tuple(answers),
                  is_impossible=impossible, context_id=context_id, title=title)


def read_json(path: str, task: str, split: str) -> tuple[list[Question], ReadStats]:
  """The questions of an official SQuAD JSON file."""
  if not fileio.isfile(path):
    raise ElectraError(
        f"{path} does not exist; put the official SQuAD files (train-v1.1.json, dev-v1.1.json, "
        "train-v2.0.json, dev-v2.0.json from https://rajpurkar.github.io/SQuAD-explorer/) in "
        "--config.data_dir, or read tfds squad with --config.data_source=tfds")
  try:
    document = json.loads(fileio.read_bytes(path).decode("utf-8-sig"))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise ElectraError(f"{path} is not a JSON file ({e}); pass the official SQuAD JSON") from e
  if not isinstance(document, dict) or "data" not in document:
    raise ElectraError(f"{path} has no top-level \"data\" list: it is not a SQuAD file; pass "
                       "the official SQuAD JSON (train-v1.1.json, dev-v2.0.json, ...)")
  version = str(document.get("version", ""))
  if task == "squad1" and version.startswith("v2"):
    raise ElectraError(f"{path} is SQuAD {version}; use --config.task=squad2 for it")
  return questions_from_articles(document["data"], task, split, path)


def read_tfds(task: str, split: str, data_dir: str | None = None
              ) -> tuple[list[Question], ReadStats]:
  """The questions of tfds `squad/v1.1` or `squad/v2.0` ("dev" reads "validation"), in the
  same form as `read_json` (paragraphs regrouped by their context text)."""
  try:
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("tensorflow-datasets is not installed; pip install tensorflow-datasets, "
                       "or use the JSON files with --config.data_source=json") from e
  name = TFDS_NAMES[task]
  builder = tfds.builder(name, data_dir=data_dir)
  tfds_split = "validation" if split == "dev" else split
  try:
    dataset = builder.as_dataset(split=tfds_split, shuffle_files=False)
  except AssertionError as e:
    root = os.fspath(builder.data_dir_root)
    raise ElectraError(
        f"tfds dataset {name} is not prepared in {root}, and this program does not download: "
        f"prepare it on a machine with network with `tfds build {name} --data_dir={root}`, or "
        "use the JSON files with --config.data_source=json") from e
  articles: dict[str, dict[str, Any]] = {}
  paragraphs: dict[tuple[str, str], dict[str, Any]] = {}
  for row in tfds.as_numpy(dataset):
    title = _text(row.get("title", b""))
    context = _text(row["context"])
    if title not in articles:
      articles[title] = {"title": title, "paragraphs": []}
    key = (title, context)
    if key not in paragraphs:
      paragraphs[key] = {"context": context, "qas": []}
      articles[title]["paragraphs"].append(paragraphs[key])
    answers = row["answers"]
    qa = {"id": _text(row["id"]), "question": _text(row["question"]),
          "answers": [{"text": _text(t), "answer_start": int(s)}
                      for t, s in zip(answers["text"], answers["answer_start"])]}
    if "is_impossible" in row:
      qa["is_impossible"] = bool(row["is_impossible"])
    paragraphs[key]["qas"].append(qa)
  return questions_from_articles(list(articles.values()), task, split, f"tfds {name}")


def _text(value: Any) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def read_split(task: str, split: str, data_source: str, data_dir: str = "",
               tfds_data_dir: str = "") -> tuple[list[Question], ReadStats]:
  """The questions of `split` ("train" or "dev") of `task` from JSON (`data_dir`) or tfds."""
  check_task(task)
  if data_source == "tfds":
    questions, stats = read_tfds(task, split, tfds_data_dir or None)
    where = f"tfds {TFDS_NAMES[task]} {split}"
  else:
    where = fileio.join(data_dir, FILES[(task, split)])
    questions, stats = read_json(where, task, split)
  if not questions:
    raise ElectraError(f"{where} holds no usable question ({_skips(stats)}); check the file")
  logging.info("%s: %d questions%s", where, len(questions),
               f", skipped {_skips(stats)}" if stats.skipped else "")
  return questions, stats


def _skips(stats: ReadStats) -> str:
  return ", ".join(f"{n} {reason}" for reason, n in sorted(stats.skipped.items())) or "none"


def gold_answers(questions: Iterable[Question]) -> dict[str, list[str]]:
  """{question id: its gold answer texts} for the metrics ([] when it has no answer)."""
  return {q.qid: [a.text for a in q.answers] for q in questions}


# --------------------------------------------------------------------------------------------
# Features.

@dataclasses.dataclass
class FeatureStats:
  """Counts of what featurization did that a user should know of."""
  questions: int = 0
  features: int = 0
  truncated_questions: int = 0  # Questions longer than max_query_length tokens.
  split_contexts: int = 0  # Questions whose context needed more than one window.
  widened_answers: int = 0  # Answers starting or ending inside a token (see module doc).
  answers_on_no_token: int = 0  # Training answers no token covers (skipped).
  out_of_window: int = 0  # Training windows that do not hold the whole answer ([CLS] label).

  def summary(self) -> str:
    parts = [f"{self.questions} questions -> {self.features} windows"]
    for name in ("truncated_questions", "split_contexts", "widened_answers",
                 "answers_on_no_token", "out_of_window"):
      if getattr(self, name):
        parts.append(f"{name.replace('_', ' ')} {getattr(self, name)}")
    return ", ".join(parts)


@dataclasses.dataclass
class Features:
  """Windows of questions, as model inputs and what prediction needs to map them back.

  Model inputs (`arrays`): input_ids, input_mask, segment_ids int32 [N, T]; start_positions,
  end_positions int32 [N] (training labels, 0 = [CLS]); is_impossible float32 [N].
  For prediction: question_index int [N] (into `questions`); token_spans int32 [N, T, 2], the
  (start, end) characters in the context of each context token, (-1, -1) elsewhere
  ([CLS], question, [SEP], padding); max_context bool [N, T], True where the token's score in
  this window counts (the window where it has the most context).
  """
  arrays: dict[str, np.ndarray]
  question_index: np.ndarray
  token_spans: np.ndarray | None
  max_context: np.ndarray | None
  questions: list[Question]
  stats: FeatureStats

  def __len__(self) -> int:
    return len(self.question_index)


MODEL_KEYS = ("input_ids", "input_mask", "segment_ids", "start_positions", "end_positions",
              "is_impossible")


def answer_tokens(spans: np.ndarray, start: int, end: int) -> tuple[int, int] | None:
  """(first, last) token whose characters overlap [start, end), or None. spans: [n, 2]."""
  nonempty = spans[:, 1] > spans[:, 0]
  hit = np.nonzero(nonempty & (spans[:, 0] < end) & (spans[:, 1] > start))[0]
  if len(hit) == 0:
    return None
  return int(hit[0]), int(hit[-1])


def context_room(max_seq_length: int, max_query_length: int) -> int:
  """Context tokens a window holds after the longest question and [CLS], [SEP], [SEP].

  Raises:
    ElectraError: none (max_seq_length leaves no room for the context).
  """
  room = max_seq_length - min(max_query_length, max_seq_length) - 3
  if room < 1:
    raise ElectraError(
        f"max_seq_length={max_seq_length} leaves no room for the context after a question of "
        f"max_query_length={max_query_length} tokens and [CLS], [SEP], [SEP]; raise "
        "--config.max_seq_length or lower --config.max_query_length")
  return room


def _tokenize_contexts(questions: Sequence[Question], tokenizer: tokenizer_lib.SubwordTokenizer
                       ) -> dict[int, tuple[list[int], np.ndarray]]:
  """{context id: (token ids, int32 [n, 2] character spans)} of every distinct context."""
  contexts: dict[int, tuple[list[int], np.ndarray]] = {}
  unique = {}
  for q in questions:
    unique.setdefault(q.context_id, q.context)
  ids_spans = tokenizer.encode_with_offsets(list(unique.values()))
  for cid, (ids, spans) in zip(unique, ids_spans, strict=True):
    contexts[cid] = (ids, np.asarray(spans, np.int32).reshape(-1, 2))
  return contexts


def _training_answer(q: Question, doc_spans: np.ndarray, stats: FeatureStats,
                     widened: list[str]) -> tuple[int, int] | None:
  """The (first, last) context token of a training question's first answer; None when it is
  on no token (the question is skipped: counted in `stats`). A widened answer is counted and
  its first examples kept in `widened`."""
  first = q.answers[0]
  answer = answer_tokens(doc_spans, first.start, first.start + len(first.text))
  if answer is None:
    stats.answers_on_no_token += 1
    if stats.answers_on_no_token <= _MAX_LOGGED:
      logging.warning("Skipped question %r: its answer %r is on no token", q.qid, first.text)
    return None
  covered = q.context[doc_spans[answer[0], 0]:doc_spans[answer[1], 1]]
  if covered != first.text:
    stats.widened_answers += 1
    if len(widened) < _MAX_LOGGED:
      widened.append(f"{first.text!r} in {covered!r}")
  return answer


def _window_inputs(tokenizer: tokenizer_lib.SubwordTokenizer, query: Sequence[int],
                   doc_ids: Sequence[int], start: int, length: int, max_seq_length: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(input_ids, input_mask, segment_ids), int32 [T] each, of `[CLS] question [SEP] window
  [SEP]`."""
  ids = ([tokenizer.cls_id] + list(query) + [tokenizer.sep_id]
         + list(doc_ids[start:start + length]) + [tokenizer.sep_id])
  n = len(ids)
  input_ids = np.full(max_seq_length, tokenizer.pad_id, np.int32)
  input_ids[:n] = ids
  input_mask = np.zeros(max_seq_length, np.int32)
  input_mask[:n] = 1
  segment_ids = np.zeros(max_seq_length, np.int32)
  segment_ids[len(query) + 2:n] = 1
  return input_ids, input_mask, segment_ids


def featurize(questions: Sequence[Question], tokenizer: tokenizer_lib.SubwordTokenizer,
              max_seq_length: int, max_query_length: int, doc_stride: int,
              training: bool) -> Features:
  """The windows of every question (see the module docstring).

  Training features carry labels and no prediction metadata (token_spans, max_context are
  None); evaluation features carry metadata and zero labels.

  Raises:
    ElectraError: max_seq_length leaves no room for the context after the question.
  """
  context_room(max_seq_length, max_query_length)
  stats = FeatureStats(questions=len(questions))
  contexts = _tokenize_contexts(questions, tokenizer)
  question_ids = tokenizer.encode_batch([q.question for q in questions])
  rows: dict[str, list[Any]] = {k: [] for k in MODEL_KEYS}
  question_index, token_spans, max_context = [], [], []
  widened: list[str] = []
  for qi, (q, query) in enumerate(zip(questions, question_ids, strict=True)):
    if len(query) > max_query_length:
      query = query[:max_query_length]
      stats.truncated_questions += 1
    doc_ids, doc_spans = contexts[q.context_id]
    answer = None
    if training and q.answers:
      answer = _training_answer(q, doc_spans, stats, widened)
      if answer is None:
        continue
    windows = window_starts(len(doc_ids), max_seq_length - len(query) - 3, doc_stride)
    if len(windows) > 1:
      stats.split_contexts += 1
    owner = max_context_windows(windows, len(doc_ids)) if not training else None
    offset = len(query) + 2  # [CLS] question [SEP]
    for w, (start, length) in enumerate(windows):
      for key, value in zip(INPUT_KEYS, _window_inputs(tokenizer, query, doc_ids, start, length,
                                                       max_seq_length)):
        rows[key].append(value)
      start_position = end_position = 0
      if answer is not None:
        if start <= answer[0] and answer[1] < start + length:
          start_position = answer[0] - start + offset
          end_position = answer[1] - start + offset
        else:
          stats.out_of_window += 1
      rows["start_positions"].append(start_position)
      rows["end_positions"].append(end_position)
      rows["is_impossible"].append(1.0 if q.is_impossible else 0.0)
      question_index.append(qi)
      if not training:
        spans = np.full((max_seq_length, 2), -1, np.int32)
        spans[offset:offset + length] = doc_spans[start:start + length]
        best = np.zeros(max_seq_length, bool)
        best[offset:offset + length] = owner[start:start + length] == w
        token_spans.append(spans)
        max_context.append(best)
  stats.features = len(question_index)
  if widened:
    logging.info("%d training answers start or end inside a token and are trained on the "
                 "tokens that cover them, e.g. %s", stats.widened_answers, "; ".join(widened))
  if not question_index:
    raise ElectraError(f"no usable question after featurization ({stats.summary()})")
  dtypes = {"is_impossible": np.float32}
  arrays = {k: np.asarray(v, dtypes.get(k, np.int32)) for k, v in rows.items()}
  return Features(
      arrays=arrays, question_index=np.asarray(question_index, np.int64),
      token_spans=np.stack(token_spans) if not training else None,
      max_context=np.stack(max_context) if not training else None,
      questions=list(questions), stats=stats)
