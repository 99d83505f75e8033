"""A sentencepiece model as a Hugging Face fast tokenizer (`tokenizer.json`).

Hugging Face's ELECTRA tokenizer is WordPiece; a sentencepiece model copied into an export
directory is not read by `AutoTokenizer`, which then builds an empty-vocabulary tokenizer from
the ELECTRA config and maps every word to [UNK]. This module rebuilds the model with the
`tokenizers` library instead, piece for piece:

  normalizer      the model's own normalization (nmt_nfkc, or nmt_nfkc_cf when it lowercases;
                  see below), then sentencepiece's whitespace rules (strip spaces at either end,
                  collapse runs of spaces)
  pre-tokenizer   "▁" for spaces, one prepended (sentencepiece's dummy prefix), split at words
  model           Unigram with the model's pieces and scores (a user-defined piece, such as
                  extend-vocab's "▁word", scored as sentencepiece scores it); one [UNK] for each
                  run of characters outside the vocabulary (byte pieces instead for a model
                  trained with byte fallback)
  post-processor  [CLS] A [SEP] and [CLS] A [SEP] B [SEP] with segment ids 0 and 1

so that `AutoTokenizer.from_pretrained(EXPORT)` gives the ids electra-jax gives, characters
outside the vocabulary included (but for the exceptions below): tested on real text, on text
full of characters outside a small vocabulary (accents, currency signs, emoji, CJK, Arabic,
Hebrew, combining marks, control and zero-width characters) and on every rewrite rule of the
model's normalization. One difference remains, as in every Hugging Face tokenizer: the literal
text of a special token ("[MASK]") becomes that token, where sentencepiece spells it out.

The normalization is not `tokenizers`' `Precompiled` normalizer alone. Sentencepiece rewrites
text with its precompiled charsmap by longest match, a character or a sequence of them at a
time (e.g. "e" + U+0301 -> "é"); `Precompiled` looks each grapheme cluster up whole and keeps
only the replacement of its shortest matching prefix, so it drops the rest of the cluster (a
combining mark after an uppercase letter when lowercasing, a zero-width joiner after a no-break
space, the second accent of decomposed Vietnamese), and it composes no cluster of 6 UTF-8 bytes
or more (Hangul jamo, kana and a voiced mark). A model whose rule is NFKC with sentencepiece's
NMT additions (the trainer's two rules), which delete control characters, is therefore exported
as:

  1. such a control character (U+0001) between any two characters that no rule holds side by
     side, so that nothing can rewrite across it: sentencepiece segments the text there anyway
     (and deletes the U+0001), so this changes nothing;
  2. the rules of characters and sequences newer than the NFKC tables of the `tokenizers` that
     exports (a few dozen of Unicode 13 to 16), applied as the charsmap does;
  3. NFKC, which composes what lies between the U+0001s as the charsmap's sequence rules do
     (U+FF5E FULLWIDTH TILDE, which the charsmap keeps, hidden from it);
  4. U+0001 between any two characters but printable ASCII, then `Precompiled`: each character a
     cluster of its own, it applies the charsmap's one-character rules (lowercasing, the NMT
     rules) and deletes the U+0001s.

This normalizes as sentencepiece does every text each rule of the charsmap rewrites, alone or
next to others, but one: U+1CCDE OUTLINED LATIN CAPITAL LETTER I + U+0307, which sentencepiece
rewrites to U+0130 yet rewrites U+0130 itself to "i" + U+0307 when it lowercases. Three or more
combining marks on one letter can still differ, where NFKC composes a later mark (U+0345 GREEK
YPOGEGRAMMENI) with the letter and sentencepiece's rules do not. A model with another rule keeps
`Precompiled` alone.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from electra_jax import fileio
from electra_jax.data.tokenizer.base import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK

TOKENIZER_JSON = "tokenizer.json"
ANY_CHAR = r"[\s\S]"  # Any character, newlines included, in `tokenizers`' (Oniguruma) regexes.
# A position not between two printable ASCII characters: NFKC composes no such pair and keeps
# each character a cluster of its own, so English text needs (and pays for) no boundaries.
NOT_BOTH_ASCII = r"(?:(?<=[^\x{20}-\x{7E}])|(?=[^\x{20}-\x{7E}]))"


def sentencepiece_tokenizer_json(model_file: str) -> str:
  """The `tokenizer.json` text of the sentencepiece model `model_file`."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel
  from tokenizers import AddedToken, Tokenizer, decoders  # pylint: disable=import-outside-toplevel
  from tokenizers import models, pre_tokenizers, processors  # pylint: disable=import-outside-toplevel

  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(fileio.read_bytes(model_file))
  vocab = _unigram_vocab(proto)
  ids = {piece: i for i, (piece, _) in enumerate(vocab)}
  byte_fallback = proto.trainer_spec.byte_fallback
  tokenizer = Tokenizer(models.Unigram(vocab, unk_id=ids[UNK], byte_fallback=byte_fallback))
  tokenizer.normalizer = _normalizer(proto.normalizer_spec)
  prepend = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
  tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend,
                                                     split=True)
  metaspace = decoders.Metaspace(replacement="▁", prepend_scheme=prepend, split=True)
  tokenizer.decoder = (decoders.Sequence([decoders.ByteFallback(), metaspace]) if byte_fallback
                       else metaspace)
  tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in SPECIAL_TOKENS])
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{CLS}:0 $A:0 {SEP}:0", pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
      special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])])
  return tokenizer.to_str()


def _unigram_vocab(proto: Any) -> list[tuple[str, float]]:
  """(piece, score) of each piece of a ModelProto for the Unigram model: its own score, or for a
  USER_DEFINED piece (such as the "▁word" pieces of `python -m electra_jax.convert
  extend-vocab`) the one sentencepiece (0.2.3) encodes with, 0.1 x (UTF-8 bytes - 1), which
  makes it win over the pieces it covers, so that it is chosen where sentencepiece chooses it.
  (Sentencepiece before 0.2.3 gave it about -0.1; the two choose alike but where a user-defined
  piece and a normal piece spanning further than it score within a point of each other.)"""
  return [(p.piece, 0.1 * (len(p.piece.encode("utf-8")) - 1) if p.type == p.USER_DEFINED
           else p.score) for p in proto.pieces]


def _normalizer(spec: Any) -> Any:
  """The `tokenizers` normalizer of a sentencepiece `NormalizerSpec` (module docstring)."""
  from tokenizers import Regex, normalizers  # pylint: disable=import-outside-toplevel

  steps = []
  if spec.precompiled_charsmap:
    steps += _charsmap_steps(spec.name, spec.precompiled_charsmap)
  if spec.remove_extra_whitespaces:
    # Only spaces: `normalizers.Strip` would also strip other Unicode whitespace (U+0085), which
    # sentencepiece keeps unless its charsmap turns it into a space.
    steps += [normalizers.Replace(Regex(r"\A +| +\z"), ""),
              normalizers.Replace(Regex(" {2,}"), " ")]
  return normalizers.Sequence(steps)


def _charsmap_steps(rule_name: str, charsmap: bytes) -> list[Any]:
  """The normalizers that apply a precompiled charsmap as sentencepiece does (module docstring:
  steps 1 to 4), or `Precompiled` alone for a rule other than NFKC or a charsmap that deletes
  too few control characters."""
  from tokenizers import Regex, normalizers  # pylint: disable=import-outside-toplevel

  plan = _charsmap_plan(charsmap) if "nfkc" in rule_name else None
  if plan is None:
    return [normalizers.Precompiled(charsmap)]
  # The control characters used as markers below must not occur in the text: they become the
  # boundary, which the charsmap deletes as it deletes them.
  steps = [normalizers.Replace(Regex(_char_class([plan.separator, *plan.kept.values()])),
                               plan.boundary),
           normalizers.Replace(Regex(plan.guard), plan.boundary)]
  if plan.chars:  # Each in a cluster of its own, between separators, then rewritten.
    chars = _char_class(plan.chars)
    steps += [normalizers.Replace(Regex(f"(?<={chars})(?={ANY_CHAR})|(?<={ANY_CHAR})(?={chars})"),
                                  plan.separator),
              normalizers.Precompiled(build_charsmap(plan.chars)),
              normalizers.Replace(plan.separator, "")]
  if plan.texts:  # A separator after each where sentencepiece's longest match finds it (so that
    # a rewrite never takes characters of another), then the rewrites.
    found = "|".join("".join(f"\\x{{{ord(c):X}}}" for c in text) for text, _ in plan.texts)
    steps.append(normalizers.Replace(Regex(f"(?:{found})\\K"), plan.separator))
    steps += [normalizers.Replace(text, replacement) for text, replacement in plan.texts]
  steps += [normalizers.Replace(char, stand_in) for char, stand_in in plan.kept.items()]
  steps.append(normalizers.NFKC())
  steps += [normalizers.Replace(stand_in, char) for char, stand_in in plan.kept.items()]
  not_boundary = _char_class([plan.boundary], negate=True)
  steps += [normalizers.Replace(Regex(f"(?<={not_boundary})(?={not_boundary}){NOT_BOTH_ASCII}"),
                                plan.boundary),
            normalizers.Precompiled(charsmap)]
  return steps


@dataclasses.dataclass(frozen=True)
class _CharsmapPlan:
  """How `_charsmap_steps` applies a charsmap with `tokenizers`' normalizers.

  Attributes:
    boundary: a control character the charsmap deletes (and no rule spans), put between
      characters.
    separator: another such character, put between characters while `chars` are rewritten.
    guard: the regex of the positions between two characters that no rule's text holds side by
      side (no rewrite spans them).
    chars: characters rewritten by their own rules before NFKC: those newer than its tables that
      start a sequence rule (U+A7F1 MODIFIER LETTER CAPITAL S -> "s", then NFKC composes "s" and
      an accent), and any whose rule NFKC would not give.
    texts: character sequences rewritten before NFKC (longest first), with their rules'
      replacements: sequences NFKC still composes otherwise.
    kept: characters the charsmap keeps and NFKC would rewrite (U+FF5E FULLWIDTH TILDE), with the
      stand-ins (more such control characters) that hide them from NFKC.
  """
  boundary: str
  separator: str
  guard: str
  chars: dict[str, str]
  texts: tuple[tuple[str, str], ...]
  kept: dict[str, str]


@functools.lru_cache(maxsize=4)
def _charsmap_plan(charsmap: bytes) -> _CharsmapPlan | None:
  """The `_CharsmapPlan` of a charsmap, or None when it deletes fewer than two control
  characters."""
  from tokenizers import normalizers  # pylint: disable=import-outside-toplevel

  rules = charsmap_rules(charsmap)
  sequences = [text for text in rules if len(text) > 1]
  spanned = {c for text in sequences for c in text}
  deleted = sorted(c for c, replacement in rules.items()
                   if len(c) == 1 and not replacement and unicodedata.category(c) == "Cc"
                   and c not in spanned)
  if len(deleted) < 2:
    return None
  nfkc = normalizers.NFKC()

  one_char = str.maketrans({c: replacement for c, replacement in rules.items() if len(c) == 1})

  def wrong(texts: list[str], chars: dict[str, str], rewrites: tuple[tuple[str, str], ...],
            kept: dict[str, str]) -> list[str]:
    """The texts among `texts` that steps 2 to 4 rewrite otherwise than the charsmap (each text
    alone: between NULs, which nothing rewrites)."""
    hide = {stand_in: deleted[0] for stand_in in kept.values()} | kept | chars
    joined = "\0".join(texts).translate(str.maketrans(hide))
    for old, new in rewrites:
      joined = joined.replace(old, new)
    joined = nfkc.normalize_str(joined).translate(str.maketrans({s: c for c, s in kept.items()}))
    outs = joined.translate(one_char).split("\0")
    return [text for text, out in zip(texts, outs, strict=True) if out != rules.get(text, text)]

  # NFKC and the one-character rules alone get a few texts wrong: characters the charsmap keeps
  # (hidden from NFKC behind a stand-in), sequences that start with a character newer than
  # NFKC's tables (that character rewritten by its rule before NFKC), then sequences still wrong
  # (canonical compositions of scripts new in Unicode 16: rewritten whole before NFKC, where
  # that helps).
  everything = [chr(i) for i in range(1, 0x110000) if not 0xD800 <= i < 0xE000]
  composed = nfkc.normalize_str("\0".join(everything)).split("\0")
  singles = [c for c, out in zip(everything, composed, strict=True) if out != c or c in rules]
  missed = wrong(singles, {}, (), {})
  chars = {c: rules[c] for c in missed if c in rules}
  kept = dict(zip(sorted(c for c in missed if c not in rules), deleted[2:]))
  missed = wrong(sequences, chars, (), kept)
  chars.update({text[0]: rules[text[0]] for text in missed
                if text[0] in rules and nfkc.normalize_str(text[0]) == text[0]})
  missed = wrong(sequences, chars, (), kept)
  texts = tuple((text, rules[text]) for text in sorted(missed, key=lambda t: (-len(t), t))
                if not wrong([text], chars, ((text, rules[text]),), kept))
  return _CharsmapPlan(deleted[0], deleted[1], _guard_pattern(rules), chars, texts, kept)


def _guard_pattern(rules: dict[str, str]) -> str:
  """The regex of the positions between two characters that are not next to each other in any
  rule's text: a character that follows nothing in any rule, or follows something else there."""
  before = collections.defaultdict(set)  # Character -> the characters it follows in rules.
  for text in rules:
    for first, second in zip(text, text[1:]):
      before[second].add(first)
  if not before:
    return f"(?<={ANY_CHAR})(?={ANY_CHAR}){NOT_BOTH_ASCII}"
  groups = collections.defaultdict(set)  # The same preceding characters -> the characters.
  for char, preceding in before.items():
    groups[frozenset(preceding)].add(char)
  alternatives = [f"(?={_char_class(before, negate=True)})"]
  for preceding, chars in sorted(groups.items(), key=lambda item: min(item[1])):
    alternatives.append(f"(?<!{_char_class(preceding)})(?={_char_class(chars)})")
  return f"(?<={ANY_CHAR}){NOT_BOTH_ASCII}(?:{'|'.join(alternatives)})"


def _char_class(chars: Iterable[str], negate: bool = False) -> str:
  """A regex character class of `chars` (ranges of consecutive code points as a-b)."""
  codes = sorted(ord(c) for c in chars)
  parts = []
  start = 0
  while start < len(codes):
    end = start
    while end + 1 < len(codes) and codes[end + 1] == codes[end] + 1:
      end += 1
    parts.append(f"\\x{{{codes[start]:X}}}" + (f"-\\x{{{codes[end]:X}}}" if end > start else ""))
    start = end + 1
  return "[" + ("^" if negate else "") + "".join(parts) + "]"


def charsmap_rules(charsmap: bytes) -> dict[str, str]:
  """The rewrite rules of a sentencepiece precompiled charsmap: {text: its replacement}.

  A charsmap is a little-endian uint32 (the byte size of a darts-clone double-array trie), the
  trie's uint32 units, then the replacements, each ending in NUL; the trie leads from a text's
  UTF-8 bytes to the offset of its replacement. Sentencepiece rewrites the longest text that
  starts where it is; any other character stays as it is.
  """
  import numpy as np  # pylint: disable=import-outside-toplevel

  size = int.from_bytes(charsmap[:4], "little")
  units = np.frombuffer(charsmap[4:4 + size], dtype="<u4").astype(np.int64)
  replacements = charsmap[4 + size:]
  labels = np.arange(1, 256, dtype=np.int64)

  def offset(unit):
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)

  rules = {}
  nodes, keys = np.zeros(1, dtype=np.int64), [b""]  # One trie level: units and their bytes.
  while len(nodes):
    child_nodes, child_keys = [], []
    for start in range(0, len(nodes), 4096):  # Blocks of 4096 x 255 candidate children.
      block = nodes[start:start + 4096]
      candidates = (block ^ offset(units[block]))[:, None] ^ labels
      inside = candidates < len(units)
      candidates = np.where(inside, candidates, 0)
      found = inside & ((units[candidates] & ((1 << 31) | 0xFF)) == labels)
      parents, columns = np.nonzero(found)
      child_nodes.append(candidates[parents, columns])
      child_keys += [keys[start + p] + bytes((b,))
                     for p, b in zip(parents.tolist(), labels[columns].tolist())]
    nodes = np.concatenate(child_nodes)
    keys = child_keys
    child_units = units[nodes]
    for i in np.nonzero((child_units >> 8) & 1)[0].tolist():
      start = int(units[nodes[i] ^ offset(child_units[i])] & ((1 << 31) - 1))
      end = replacements.index(b"\0", start)
      try:
        rules[keys[i].decode("utf-8")] = replacements[start:end].decode("utf-8")
      except UnicodeDecodeError:
        continue  # Matches no text; sentencepiece writes none.
  return rules


def build_charsmap(rules: dict[str, str]) -> bytes:
  """A precompiled charsmap (the format `charsmap_rules` reads) of `rules`: {text: replacement},
  texts without NUL."""
  trie: dict[int, Any] = {}  # Byte -> subtree; key -1 holds the replacement where a text ends.
  for text, replacement in rules.items():
    node = trie
    for byte in text.encode("utf-8"):
      node = node.setdefault(byte, {})
    node[-1] = replacement
  pool, offsets = bytearray(), {}
  units = [0]  # Unit 0 is the root.
  used = bytearray(b"\1")
  bases = set()  # Each node its own base: a unit is then the child of one node only.
  free = 1  # No unused position below this one.

  def place(position: int, node: dict[int, Any], label: int) -> None:
    """Writes `node` (reached with byte `label`) at `position` and its children after it."""
    nonlocal free
    slots = [b for b in node if b >= 0] + ([0] if -1 in node else [])
    base = free
    while (base in bases or base ^ position >= 1 << 21
           or any(base ^ s < len(used) and used[base ^ s] for s in slots)):
      base += 1
    bases.add(base)
    top = max(base ^ s for s in slots) + 1 if slots else 0
    if top > len(used):
      used.extend(bytes(top - len(used)))
      units.extend([0] * (top - len(units)))
    for s in slots:
      used[base ^ s] = 1
    while free < len(used) and used[free]:
      free += 1
    units[position] = label | ((-1 in node) << 8) | ((base ^ position) << 10)
    if -1 in node:
      replacement = node[-1].encode("utf-8")
      if replacement not in offsets:
        offsets[replacement] = len(pool)
        pool.extend(replacement + b"\0")
      units[base] = offsets[replacement] | (1 << 31)
    for byte in sorted(b for b in node if b >= 0):
      place(base ^ byte, node[byte], byte)

  place(0, trie, 0)
  # Readers look up any byte from any node without a bounds check: cover whole blocks of 256.
  units.extend([0] * ((max(bases) | 0xFF) + 1 - len(units)))
  packed = b"".join(unit.to_bytes(4, "little") for unit in units)
  return len(packed).to_bytes(4, "little") + packed + bytes(pool)


def tokenizer_config(max_length: int, lowercase: bool) -> dict[str, Any]:
  """The `tokenizer_config.json` that makes `AutoTokenizer` load `tokenizer.json` as is."""
  return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
          "do_lower_case": lowercase, "pad_token": PAD, "unk_token": UNK, "cls_token": CLS,
          "sep_token": SEP, "mask_token": MASK,
          "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}


def write_sentencepiece(model_file: str, directory: str, max_length: int,
                        lowercase: bool) -> list[str]:
  """Writes tokenizer.json and tokenizer_config.json for `model_file` into `directory`;
  returns their names."""
  fileio.write_atomic(fileio.join(directory, TOKENIZER_JSON),
                      sentencepiece_tokenizer_json(model_file))
  fileio.write_atomic(fileio.join(directory, "tokenizer_config.json"),
                      json.dumps(tokenizer_config(max_length, lowercase), indent=2) + "\n")
  return [TOKENIZER_JSON, "tokenizer_config.json"]


def add_cls_and_sep(path: str, cls_id: int, sep_id: int) -> bool:
  """Makes the tokenizer.json at `path` add [CLS] before and [SEP] after a text (and
  `[CLS] A [SEP] B [SEP]` for a pair, segments 0 and 1), as electra-jax's inputs have them,
  when its post-processor does not already (a tokenizer.json trained without one); returns
  whether the file changed.

  Args:
    path: a Hugging Face tokenizer.json, rewritten in place.
    cls_id, sep_id: the ids of the tokenizer's [CLS] and [SEP] (their pieces are the file's).
  """
  from tokenizers import Tokenizer, processors  # pylint: disable=import-outside-toplevel
  tokenizer = Tokenizer.from_file(path)
  probe = tokenizer.encode("a")
  bare = tokenizer.encode("a", add_special_tokens=False).ids
  if probe.ids == [cls_id, *bare, sep_id]:
    return False
  cls, sep = tokenizer.id_to_token(cls_id), tokenizer.id_to_token(sep_id)
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
      special_tokens=[(cls, cls_id), (sep, sep_id)])
  fileio.write_atomic(path, tokenizer.to_str())
  return True
