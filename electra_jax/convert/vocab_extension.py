"""`python -m electra_jax.convert extend-vocab`: new words appended to a checkpoint's vocabulary,
their embedding rows initialised from the pieces they used to be split into.

  python -m electra_jax.convert extend-vocab --checkpoint=IN --tokens=FILE --output=OUT
  python -m electra_jax.convert extend-vocab --checkpoint=IN --from_corpus=GLOB --num_tokens=N \
      --output=OUT

Every existing id keeps its meaning: the new words get the ids after the tokenizer's last one.
A WordPiece vocab.txt gets them as new lines (greedy longest-match-first then takes the whole
word); a sentencepiece model gets them as USER_DEFINED pieces "▁word" (matched after a space or
at the start of the text, where sentencepiece always prefers them). A word the tokenizer already
encodes as one id is skipped. A longer word that starts with a new one (e.g. "wordy" after
adding "word") may now start with the new id too.

The words come from a file (one per line), or from a corpus: its words are counted as the
tokenizer sees them (its normalization, lowercasing included, then split at whitespace and
punctuation, punctuation marks dropped; for sentencepiece only the words that follow whitespace
or start a line, the only places a "▁word" piece matches), the candidates are the words the
tokenizer splits into two or more pieces, ranked by frequency x (pieces - 1), the tokens a new
id saves on the corpus, then by frequency, then alphabetically; the first N are added.

Each vocabulary-sized parameter grows: the shared word embeddings, an untied generator's own
table (`generator_embeddings`), GDES's embedding delta and every output bias over the
vocabulary (the generator's, the MLM objectives', Electric's cloze head). The new row (bias
entry) of a word is the mean of the rows (entries) of the pieces the old tokenizer split it
into; every other weight is copied bit for bit. A table with more rows than the tokenizer has
ids (padding rows) keeps them; new ids still start at the tokenizer's size and the table grows
only as far as they need.

The pure parts: `choose_words` (the corpus rule), `mean_rows` (the new rows), `grow_params`
(every vocabulary-sized parameter), `extended_wordpiece_vocab` / `extended_sentencepiece_model`
(the new tokenizer files); `extend_vocab` reads the checkpoint and writes OUT.
"""

from __future__ import annotations

import collections
import os
import string
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data.tokenizer.wordpiece import bert_pipeline
from electra_jax.errors import ElectraError
from electra_jax.training import pretrained

ADDED_TOKENS_FILE = "added_tokens.txt"
SPACE = "\u2581"  # Sentencepiece's "▁", the space before a word.
# Parameter paths holding a row (or entry) per token id: `.../word_embeddings/embedding` (the
# shared and an untied generator's tables), GDES's `<delta>/word_embeddings`, and every
# `.../output_bias` (the MLM heads: generator_predictions, mlm_predictions, cloze_predictions).
_VOCAB_KEYS = ("word_embeddings", "output_bias")
_EXAMPLE = ("python -m electra_jax.convert extend-vocab --checkpoint=runs/small "
            "--tokens=words.txt --output=runs/small_more_words")


def _keys(path) -> tuple[str, ...]:
  return tuple(str(getattr(k, "key", k)) for k in path)


def is_vocab_param(path: Sequence[Any]) -> bool:
  """Whether the parameter at `path` (keys or jax tree path entries) has one row per token id
  along its first axis."""
  keys = _keys(path)
  return keys[-1] == "output_bias" or "word_embeddings" in keys


def vocab_param_paths(params: Mapping[str, Any]) -> list[str]:
  """"a/b/c" of every vocabulary-sized parameter of `params`."""
  return ["/".join(_keys(p)) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]
          if is_vocab_param(p)]


# --------------------------------------------------------------------------------------------
# Words: how a tokenizer sees them, counting, choosing.


class WordView:
  """A tokenizer's words: `split(text)` gives the words of a text as the tokenizer's
  pre-tokenizer sees them (normalized, split at whitespace and punctuation), and
  `normalize_word(word)` the vocabulary form of one word, or raises."""

  def __init__(self, tokenizer: tokenizer_lib.SubwordTokenizer):
    import tokenizers  # pylint: disable=import-outside-toplevel
    from tokenizers import models as hf_models  # pylint: disable=import-outside-toplevel
    from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel
    self.kind = tokenizer.kind
    self._split = pre_tokenizers.BertPreTokenizer()
    if self.kind == tokenizer_lib.WORDPIECE:
      # The WordPiece tokenizer's own normalizer and pre-tokenizer (wordpiece.bert_pipeline).
      self._hf = bert_pipeline(tokenizers.Tokenizer(hf_models.WordLevel(
          {tokenizer_lib.UNK: 0}, unk_token=tokenizer_lib.UNK)),
          bool(getattr(tokenizer, "lowercase", True)))
    else:
      import sentencepiece as spm  # pylint: disable=import-outside-toplevel
      self._sp = spm.SentencePieceProcessor()
      self._sp.LoadFromSerializedProto(fileio.read_bytes(tokenizer.model_file))

  def split(self, text: str) -> list[str]:
    """The words of `text` that a new vocabulary entry can match: WordPiece, every word after
    normalization and BERT's split at whitespace and punctuation; sentencepiece, the first of
    those in each stretch between spaces of the normalized text (the word after a "▁").
    Punctuation marks are not words."""
    if self.kind == tokenizer_lib.WORDPIECE:
      normalized = self._hf.normalizer.normalize_str(text)
      words = [w for w, _ in self._hf.pre_tokenizer.pre_tokenize_str(normalized)]
    else:
      words = []
      for chunk in self._sp.Normalize(text).split(SPACE):
        first = self._split.pre_tokenize_str(chunk) if chunk else None
        if first:
          words.append(first[0][0])
    return [w for w in words if not _is_punctuation(w)]

  def normalize_word(self, word: str) -> str:
    """The vocabulary form of a given word (lowercased etc. as the tokenizer does).

    Raises:
      ElectraError: the word is several words to the tokenizer, or nothing at all.
    """
    if self.kind == tokenizer_lib.WORDPIECE:
      normalized = self._hf.normalizer.normalize_str(word)
      parts = [w for w, _ in self._hf.pre_tokenizer.pre_tokenize_str(normalized)]
      if len(parts) == 1 and len(parts[0]) > tokenizer_lib.MAX_WORD_CHARS:
        raise ElectraError(f"{word[:40]!r} is longer than {tokenizer_lib.MAX_WORD_CHARS} "
                           "characters, which WordPiece always encodes as [UNK]; drop it")
    else:
      normalized = self._sp.Normalize(word).lstrip(SPACE)
      parts = normalized.split(SPACE) if normalized else []
    if not parts:
      raise ElectraError(f"{word!r} is no word to the {self.kind} tokenizer (its normalization "
                         "leaves nothing of it); drop it")
    if len(parts) != 1:
      what = ("splits it at punctuation" if self.kind == tokenizer_lib.WORDPIECE
              else "splits it at spaces")
      raise ElectraError(
          f"{word!r} is {len(parts)} words to the "
          f"{self.kind} tokenizer (it {what}: {parts}); list one word per line, without "
          "spaces" + (" or punctuation" if self.kind == tokenizer_lib.WORDPIECE else ""))
    return parts[0]

  def has_piece(self, word: str) -> bool:
    """Whether sentencepiece has a "▁word" piece already, chosen or not (it cannot get a
    second one); WordPiece: False (its encoding finds any vocab.txt line that is the word)."""
    if self.kind == tokenizer_lib.WORDPIECE:
      return False
    piece = SPACE + word
    return self._sp.IdToPiece(self._sp.PieceToId(piece)) == piece


def _is_punctuation(word: str) -> bool:
  """A punctuation mark, which BERT's pre-tokenizer makes a word of its own: not a word."""
  return len(word) == 1 and (word in string.punctuation
                             or unicodedata.category(word).startswith("P"))


def choose_words(counts: Mapping[str, int], pieces: Mapping[str, int], num_words: int
                 ) -> list[str]:
  """The corpus rule: the words split into 2+ pieces, ranked by the tokens a new id would save
  on the corpus, frequency x (pieces - 1), then by frequency, then alphabetically; the first
  `num_words`.

  Args:
    counts: {word: its number of occurrences in the corpus}.
    pieces: {word: the number of pieces the current tokenizer splits it into}.
    num_words: how many to choose (fewer when fewer words are split).
  """
  candidates = [w for w, n in counts.items() if pieces[w] >= 2 and n > 0]
  candidates.sort(key=lambda w: (-counts[w] * (pieces[w] - 1), -counts[w], w))
  return candidates[:num_words]


def read_words_file(path: str) -> list[str]:
  """The words of a --tokens file, one per line: stripped, blank lines dropped.

  Raises:
    ElectraError: the file is missing, not UTF-8, has no word, or a line with spaces inside.
  """
  if not fileio.isfile(path):
    raise ElectraError(f"--tokens={path} does not exist; pass a text file with one word per line")
  try:
    text = fileio.read_bytes(path).decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise ElectraError(f"--tokens={path} is not UTF-8 text ({e}); save it as UTF-8, one word "
                       "per line") from e
  words = []
  for number, line in enumerate(text.splitlines(), start=1):
    word = line.strip()
    if not word:
      continue
    if len(word.split()) > 1:
      raise ElectraError(f"line {number} of --tokens={path} holds several words ({word[:40]!r});"
                         " put one word per line")
    words.append(word)
  if not words:
    raise ElectraError(f"--tokens={path} holds no word; put one word per line")
  return words


def corpus_files(pattern: str) -> list[str]:
  """The files of --from_corpus: comma-separated globs, local or gs://.

  Raises:
    ElectraError: a glob matches no file.
  """
  files = []
  for glob in (g.strip() for g in pattern.split(",")):
    if not glob:
      continue
    matched = fileio.glob(glob)
    if not matched:
      raise ElectraError(f"--from_corpus glob {glob!r} matches no file; check the path (quote "
                         "the glob so that the shell leaves it to this command)")
    files.extend(m for m in matched if m not in files)
  if not files:
    raise ElectraError("--from_corpus is empty; pass a glob of UTF-8 text files, e.g. "
                       "--from_corpus='corpus/*.txt'")
  return files


def count_words(lines: Iterable[str], split: Callable[[str], list[str]]) -> collections.Counter:
  """{word: occurrences} of `lines`, split into words by `split`."""
  counts: collections.Counter = collections.Counter()
  for line in lines:
    if line.strip():
      counts.update(split(line))
  return counts


def _lines(files: Sequence[str]) -> Iterable[str]:
  """The lines of the --from_corpus files (undecodable bytes replaced), without a file's
  byte-order mark."""
  for path in files:
    with fileio.open_file(path, "rb") as f:
      for number, raw in enumerate(f, start=1):
        yield raw.decode("utf-8-sig" if number == 1 else "utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# Parameters.


def mean_rows(table: np.ndarray, piece_ids: Sequence[Sequence[int]]) -> np.ndarray:
  """[len(piece_ids), ...]: for each word, the mean of `table`'s rows (entries) at its pieces'
  ids (computed in float64, returned in the table's dtype)."""
  table = np.asarray(table)
  if not piece_ids:
    return np.zeros((0,) + table.shape[1:], table.dtype)
  return np.stack([table[list(ids)].astype(np.float64).mean(axis=0) for ids in piece_ids]
                  ).astype(table.dtype)


def grow_params(params: Mapping[str, Any], first_id: int,
                piece_ids: Sequence[Sequence[int]]) -> dict[str, Any]:
  """`params` with rows `first_id .. first_id + len(piece_ids) - 1` of every vocabulary-sized
  parameter (`is_vocab_param`) set to `mean_rows` of its old rows; a table grows to
  `first_id + len(piece_ids)` rows when it has fewer (padding rows beyond the new ids are kept).
  Every other parameter is the same array object; the old rows are copied bit for bit."""
  needed = first_id + len(piece_ids)

  def grow(path, x):
    if not is_vocab_param(path):
      return x
    x = np.asarray(x)
    out = np.zeros((max(x.shape[0], needed),) + x.shape[1:], x.dtype)
    out[:x.shape[0]] = x
    out[first_id:needed] = mean_rows(x, piece_ids)
    return out

  return jax.tree_util.tree_map_with_path(grow, dict(params))


def _table_rows(params: Mapping[str, Any], model_config) -> int:
  """The number of rows every vocabulary-sized parameter has.

  Raises:
    ElectraError: they disagree, or another parameter looks vocabulary-sized (a parameter this
      command does not know how to grow).
  """
  leaves = jax.tree_util.tree_flatten_with_path(params)[0]
  rows = {"/".join(_keys(p)): np.shape(x)[0] for p, x in leaves if is_vocab_param(p)}
  if not rows:
    raise ElectraError("the checkpoint has no word embeddings; extend-vocab needs a pretraining "
                       "checkpoint (a workdir or a from-hf output)")
  if len(set(rows.values())) > 1:
    raise ElectraError(f"the checkpoint's vocabulary-sized parameters disagree on the number of "
                       f"rows ({rows}); the checkpoint is inconsistent: use another one")
  count = next(iter(rows.values()))
  others = {int(v) for v in model_config.to_dict().values()
            if isinstance(v, int) and not isinstance(v, bool)} - {count}
  if count not in others:
    unknown = ["/".join(_keys(p)) for p, x in leaves
               if not is_vocab_param(p) and np.ndim(x) and np.shape(x)[0] == count]
    if unknown:
      raise ElectraError(f"{', '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} a row "
                         f"per token id ({count}) but extend-vocab does not know how to grow "
                         "it; this checkpoint's objective is not supported")
  return count


# --------------------------------------------------------------------------------------------
# Tokenizer files.


def extended_wordpiece_vocab(tokenizer: tokenizer_lib.SubwordTokenizer,
                             words: Sequence[str]) -> str:
  """The vocab.txt text of `tokenizer` with `words` appended, one token a line."""
  tokens = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)] + list(words)
  return "".join(t + "\n" for t in tokens)


def extended_sentencepiece_model(model_bytes: bytes, words: Sequence[str]) -> bytes:
  """A serialized sentencepiece ModelProto with "▁word" appended as a USER_DEFINED piece for
  each of `words` (their ids follow the model's last)."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(model_bytes)
  for word in words:
    piece = proto.pieces.add()
    piece.piece = SPACE + word
    piece.score = 0.0
    piece.type = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
  return proto.SerializeToString()


# --------------------------------------------------------------------------------------------
# The command.


class ExtendVocabResult(NamedTuple):
  """What `extend_vocab` wrote."""
  step_dir: str  # OUT/checkpoints/<step>.
  output_dir: str
  added: list[str]  # The new words, in id order.
  first_id: int
  skipped: list[str]  # Given words the tokenizer already encodes as one id (or has an entry for).
  vocab_size: int  # The new tokenizer's.
  old_rows: int  # The embedding table's rows before and after.
  rows: int
  kind: str
  requested: int  # --num_tokens, or the number of distinct given words.
  step: int


def _check_output(output_dir: str, step_dir: str, overwrite: bool) -> str:
  output_dir = fileio.absolute(output_dir).rstrip("/")
  source = fileio.absolute(step_dir).rstrip("/")
  for a, b in ((output_dir, source), (source, output_dir)):
    if a == b or a.startswith(b + "/"):
      raise ElectraError(f"the output {output_dir} overlaps the input {source}; write to a "
                         "directory of its own")
  if fileio.exists(output_dir) and not fileio.isdir(output_dir):
    raise ElectraError(f"the output {output_dir} is a file; pass a directory")
  if fileio.isdir(output_dir) and fileio.listdir(output_dir) and not overwrite:
    raise ElectraError(f"the output {output_dir} exists and is not empty; choose a new "
                       "directory or pass --overwrite to replace it")
  return output_dir


def _check_choice(tokens: str | None, from_corpus: str | None, num_tokens: int | None) -> None:
  corpus_example = "--from_corpus='corpus/*.txt' --num_tokens=1000"
  if tokens and from_corpus:
    raise ElectraError("--tokens and --from_corpus both given; pass one: --tokens=FILE (words "
                       f"to add) or {corpus_example} (the corpus's most split words)")
  if not tokens and not from_corpus:
    raise ElectraError("extend-vocab needs --tokens=FILE (words to add, one a line) or "
                       f"{corpus_example}, e.g. {_EXAMPLE}")
  if tokens and num_tokens is not None:
    raise ElectraError("--num_tokens applies to --from_corpus only (--tokens adds every word of "
                       "its file); drop it")
  if from_corpus and num_tokens is None:
    raise ElectraError("--from_corpus needs --num_tokens=N, how many words to add, e.g. "
                       f"{corpus_example}")
  if from_corpus and num_tokens <= 0:
    raise ElectraError(f"--num_tokens={num_tokens}; it is how many words to add: pass a "
                       "positive number")


def extend_vocab(checkpoint: str, output_dir: str, tokens: str | None = None,
                 from_corpus: str | None = None, num_tokens: int | None = None,
                 overwrite: bool = False) -> ExtendVocabResult:
  """Appends words to a checkpoint's vocabulary and writes the grown checkpoint (module
  docstring).

  Args:
    checkpoint: anything `pretrained.find_step_dir` accepts.
    output_dir: the checkpoint to write (`pretrained.save_pretrained`'s layout, plus
      OUT/added_tokens.txt, the new words in id order); new or empty unless `overwrite`.
    tokens: a file of words to add, one per line (blank lines and repeats dropped).
    from_corpus: instead, comma-separated globs of text files whose most split words to add.
    num_tokens: with `from_corpus`, how many words to add.
    overwrite: replace a non-empty `output_dir` (only once the new one is complete).

  Raises:
    ElectraError: bad arguments, no usable checkpoint or tokenizer, nothing to add, or a word
      the new tokenizer would not encode as one id.
  """
  _check_choice(tokens, from_corpus, num_tokens)
  step_dir = pretrained.find_step_dir(checkpoint)
  output_dir = _check_output(output_dir, step_dir, overwrite)
  files = corpus_files(from_corpus) if from_corpus else []
  meta = pretrained.read_meta(step_dir)
  loaded, tokenizer, old_rows = _load_checkpoint(step_dir)
  first_id = tokenizer.vocab_size
  view = WordView(tokenizer)
  if tokens:
    added, skipped, requested, pieces = _words_of_file(tokens, view, tokenizer)
  else:
    added, requested, pieces = _words_of_corpus(files, from_corpus, num_tokens, view, tokenizer)
    skipped = []
  piece_ids = [pieces[w] for w in added]
  written, new_tokenizer, rows = _write_extended(
      loaded, meta, tokenizer, added, piece_ids, first_id, old_rows, step_dir, output_dir,
      overwrite)
  # The word list repeats what the tokenizer holds (ids first_id...), so OUT is a complete
  # checkpoint already; a failure to write it removes OUT all the same.
  try:
    fileio.write_atomic(fileio.join(output_dir, ADDED_TOKENS_FILE),
                        "".join(w + "\n" for w in added))
  except BaseException:
    fileio.rmtree(output_dir)
    raise
  return ExtendVocabResult(written, output_dir, added, first_id, skipped,
                           new_tokenizer.vocab_size, old_rows, rows, tokenizer.kind, requested,
                           loaded.step)


def _load_checkpoint(step_dir: str
                     ) -> tuple[pretrained.Pretrained, tokenizer_lib.SubwordTokenizer, int]:
  """(every part of the checkpoint, its tokenizer, its embedding rows), after refusing a
  checkpoint without a tokenizer or with more tokens than rows."""
  loaded = pretrained.load_pretrained(step_dir, parts=None)
  if loaded.tokenizer is None:
    raise ElectraError(f"the checkpoint {step_dir} records no tokenizer that can be found; "
                       "extend-vocab needs the vocabulary the model was trained with (put it in "
                       "the workdir's tokenizer/ directory)")
  tokenizer = loaded.tokenizer.load()
  if tokenizer.kind not in (tokenizer_lib.WORDPIECE, tokenizer_lib.SENTENCEPIECE):
    raise ElectraError(f"the checkpoint's tokenizer {loaded.tokenizer.file} is a "
                       f"{tokenizer.kind} (a Hugging Face tokenizer.json); extend-vocab adds "
                       "words to a WordPiece vocab.txt or a sentencepiece model only")
  old_rows = _table_rows(loaded.params, loaded.model_config)
  if tokenizer.vocab_size > old_rows:
    raise ElectraError(f"the tokenizer {loaded.tokenizer.file} has {tokenizer.vocab_size} tokens "
                       f"but the model only {old_rows} embedding rows; the checkpoint's "
                       "tokenizer is not the one it was trained with")
  return loaded, tokenizer, old_rows


def _words_of_file(tokens: str, view: WordView, tokenizer: tokenizer_lib.SubwordTokenizer
                   ) -> tuple[list[str], list[str], int, dict[str, list[int]]]:
  """--tokens: (the words to add, those skipped as in the vocabulary already, how many the file
  asked for, {word: its pieces' ids})."""
  words = list(dict.fromkeys(view.normalize_word(w) for w in read_words_file(tokens)))
  pieces = dict(zip(words, tokenizer.encode_batch(words), strict=True))
  skipped = [w for w in words if (len(pieces[w]) == 1 and pieces[w][0] != tokenizer.unk_id)
             or view.has_piece(w)]
  added = [w for w in words if w not in skipped]
  if not added:
    raise ElectraError(f"every word of --tokens={tokens} is in the vocabulary already; "
                       "nothing to add")
  return added, skipped, len(words), pieces


def _words_of_corpus(files: Sequence[str], from_corpus: str, num_tokens: int, view: WordView,
                     tokenizer: tokenizer_lib.SubwordTokenizer
                     ) -> tuple[list[str], int, dict[str, list[int]]]:
  """--from_corpus: (the `num_tokens` most split words to add, `num_tokens`, {word: its
  pieces' ids})."""
  counts = count_words(_lines(files), view.split)
  if not counts:
    raise ElectraError(f"the corpus --from_corpus={from_corpus} ({len(files)} file"
                       f"{'s' if len(files) > 1 else ''}) holds no words; pass UTF-8 text")
  distinct = sorted(counts)
  pieces = dict(zip(distinct, tokenizer.encode_batch(distinct), strict=True))
  # A word whose "▁word" piece exists but is not chosen cannot get a second one.
  split = {w: 1 if len(ids) > 1 and view.has_piece(w) else len(ids)
           for w, ids in pieces.items()}
  added = choose_words(counts, split, num_tokens)
  if not added:
    raise ElectraError(f"the tokenizer encodes every word of the corpus --from_corpus="
                       f"{from_corpus} as one token already; nothing to add")
  return added, num_tokens, pieces


def _write_extended(loaded: pretrained.Pretrained, meta: dict[str, Any],
                    tokenizer: tokenizer_lib.SubwordTokenizer, added: Sequence[str],
                    piece_ids: Sequence[Sequence[int]], first_id: int, old_rows: int,
                    step_dir: str, output_dir: str, overwrite: bool
                    ) -> tuple[str, tokenizer_lib.SubwordTokenizer, int]:
  """Writes the grown checkpoint: the extended tokenizer (checked to encode each new word as
  its new id) and the grown parameters. Returns (the step directory written, the new
  tokenizer, the new embedding rows)."""
  with tempfile.TemporaryDirectory(prefix="electra_jax_extend_vocab_") as tmp:
    name = os.path.basename(loaded.tokenizer.file)
    new_file = os.path.join(tmp, name)
    if tokenizer.kind == tokenizer_lib.WORDPIECE:
      fileio.write_atomic(new_file, extended_wordpiece_vocab(tokenizer, added))
    else:
      fileio.write_atomic(new_file, extended_sentencepiece_model(
          fileio.read_bytes(loaded.tokenizer.file), added))
    info = pretrained.TokenizerInfo(new_file, tokenizer.kind, loaded.tokenizer.lowercase)
    new_tokenizer = info.load()
    _check_encoding(new_tokenizer, added, first_id)
    params = grow_params(loaded.params, first_id, piece_ids)
    rows = max(old_rows, first_id + len(added))
    model_config = loaded.model_config.copy_and_resolve_references()
    model_config.vocab_size = rows
    encoder = meta.get("encoder") or dict(loaded.encoder)
    extra_meta = {"encoder": encoder,
                  "extended_vocab": {"from": step_dir, "added": len(added), "first_id": first_id,
                                     "tokens_file": ADDED_TOKENS_FILE}}
    if loaded.finetuned:
      extra_meta["finetuned"] = loaded.finetuned
    written = pretrained.save_pretrained(
        output_dir, params, model_config, info, step=loaded.step, overwrite=overwrite,
        source=f"extend-vocab:{step_dir}", extra_meta=extra_meta)
  return written, new_tokenizer, rows


def _check_encoding(tokenizer: tokenizer_lib.SubwordTokenizer, words: Sequence[str],
                    first_id: int) -> None:
  """Raises ElectraError unless each of `words` encodes to its new id alone."""
  encoded = tokenizer.encode_batch(list(words))
  for i, (word, ids) in enumerate(zip(words, encoded, strict=True)):
    if ids != [first_id + i]:
      pieces = [tokenizer.id_to_piece(j) for j in ids]
      raise ElectraError(f"with {word!r} added (id {first_id + i}), the {tokenizer.kind} "
                         f"tokenizer still encodes it as {pieces}; drop that word")


def summary(result: ExtendVocabResult) -> str:
  """The command's one summary line."""
  n = len(result.added)
  shown = ", ".join(repr(w) for w in result.added[:5]) + (", ..." if n > 5 else "")
  ids = (f"id {result.first_id}" if n == 1
         else f"ids {result.first_id}-{result.first_id + n - 1}")
  parts = [f"added {n} token{'s' if n != 1 else ''} ({ids}: {shown})"]
  if result.requested > n + len(result.skipped):
    parts.append(f"only {n} of the corpus's words split into several pieces "
                 f"(--num_tokens={result.requested})")
  if result.skipped:
    parts.append(f"skipped {len(result.skipped)} already in the vocabulary ("
                 + ", ".join(repr(w) for w in result.skipped[:5])
                 + (", ..." if len(result.skipped) > 5 else "") + ")")
  vocab = f"the {result.kind} vocabulary now has {result.vocab_size} tokens"
  if result.old_rows > result.first_id:
    padding = min(n, result.old_rows - result.first_id)
    vocab += (f"; {padding} of the embedding table's {result.old_rows - result.first_id} "
              f"padding rows hold new tokens"
              + (f", and it grew to {result.rows} rows" if result.rows > result.old_rows
                 else f", so it keeps its {result.rows} rows"))
  parts.append(vocab)
  parts.append(f"wrote {result.output_dir} (step {result.step}, words in "
               f"{fileio.join(result.output_dir, ADDED_TOKENS_FILE)}); continue pretraining "
               f"with --config.init_checkpoint={result.output_dir}, fine-tune from it, or "
               "export it with to-hf")
  return "; ".join(parts)
