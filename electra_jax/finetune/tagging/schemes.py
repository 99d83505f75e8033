"""Label schemes: which tags a scheme allows, the entities a tag sequence holds, the label set.

A tag is "O" (outside any entity) or PREFIX-TYPE, split at the FIRST hyphen as conlleval does
(so "B-ORG-LOC" is prefix B, type "ORG-LOC"). The schemes (`--config.label_scheme`):

  BIO    (IOB2)  B-X begins an entity of type X, I-X continues it, O is outside. Files in IOB1
                 (CoNLL-2003's original, where I-X also begins an entity and B-X only parts two
                 adjacent entities of one type) have the same tags and are read as BIO:
                 conlleval counts their entities the same way.
  BIOES  (IOBES) BIO plus E-X (the last token of an entity of several tokens) and S-X (an
                 entity of one token).
  IO             I-X and O only: consecutive tokens of one type are one entity.
  NONE           tags without entity structure (e.g. POS tags "NN", "-LRB-"): any tag is
                 allowed, a tag sequence holds no entity, only token accuracy means something.

`spans` finds entities exactly as conlleval (the CoNLL shared tasks' scorer, in the version
that also knows E- and S-) decides where a chunk starts and ends: seqeval's `get_entities`,
its default (conlleval-compatible) mode, for every scheme. Not seqeval's strict mode: it drops
an entity that does not begin with B- (IOB2) or B-/S- (IOBES), where conlleval counts one, so
IOB1 files, ill-formed predictions (B-PER I-LOC, an I-X after O) and IO (no strict scheme in
seqeval) would score otherwise. The rules, between a previous tag (P-T1, or O) and the current
one (C-T2, or O):

  a chunk ends before the current tag when P is B or I and C is B, S or O; P is E or S
    (always); or P is not O and the type changes (T1 != T2);
  a chunk starts at the current tag when C is B or S; C is I or E and P is O, E or S (an I-X
    after O begins an entity, E-X after O or E-X is one of its own); or C is not O and the
    type changes (so B-PER I-LOC is two entities, PER then LOC).

A sentence is scored alone: its start and end are O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from electra_jax.errors import ElectraError

if TYPE_CHECKING:
  from electra_jax.finetune.tagging.conll import Sentence

BIO, BIOES, IO, NONE = "BIO", "BIOES", "IO", "NONE"
SCHEMES = (BIO, BIOES, IO, NONE)
OUTSIDE = "O"
# The prefixes of each scheme's tags (besides "O"); NONE allows any tag.
PREFIXES = {BIO: ("B", "I"), BIOES: ("B", "I", "E", "S"), IO: ("I",)}
_FORMS = {BIO: "O, B-TYPE, I-TYPE", BIOES: "O, B-TYPE, I-TYPE, E-TYPE, S-TYPE",
          IO: "O, I-TYPE"}

Span = tuple[str, int, int]  # (type, start, end): the entity is words start..end-1.


def check_scheme(scheme: str) -> str:
  """The canonical name ("BIO", "BIOES", "IO", "NONE") of a scheme given in any case.

  Raises:
    ElectraError: it is none of them.
  """
  name = str(scheme).upper()
  if name not in SCHEMES:
    raise ElectraError(f"label_scheme={scheme!r} is not a label scheme; set "
                       f"--config.label_scheme to one of {', '.join(SCHEMES)}")
  return name


def guess_scheme(labels: Sequence[str]) -> str:
  """The scheme of a label set (a model converted from Hugging Face records none): with an
  "O" label, IO when every other label is I-TYPE, else BIO when each is B- or I-TYPE, else
  BIOES when each is B-, I-, E- or S-TYPE; NONE otherwise (no "O", or a label of no scheme,
  e.g. part-of-speech tags)."""
  if OUTSIDE not in labels:
    return NONE
  for scheme in (IO, BIO, BIOES):
    if all(tag_problem(label, scheme) is None for label in labels):
      return scheme
  return NONE


def split_tag(tag: str) -> tuple[str, str]:
  """(prefix, type) of a tag, split at the first hyphen as conlleval; ("O", "") for "O" and
  (tag, "") for a tag without a hyphen."""
  prefix, hyphen, kind = tag.partition("-")
  return (prefix, kind) if hyphen else (tag, "")


def tag_problem(tag: str, scheme: str) -> str | None:
  """Why `tag` is not a tag of `scheme` (canonical name), or None when it is."""
  if scheme == NONE or tag == OUTSIDE:
    return None
  prefix, kind = split_tag(tag)
  if prefix in PREFIXES[scheme] and kind:
    return None
  form = f"{scheme} tags are {_FORMS[scheme]}"
  if prefix in ("E", "S") and kind and scheme != BIOES:
    fix = "set --config.label_scheme=BIOES for a file with E- and S- tags"
  elif prefix == "B" and kind and scheme == IO:
    fix = "set --config.label_scheme=BIO for a file with B- tags"
  elif prefix in PREFIXES[BIOES] and not kind:
    fix = "give the tag an entity type after the hyphen, e.g. B-PER"
  else:
    fix = ("set --config.label_scheme=NONE for tags without entity prefixes (e.g. POS), or fix "
           "the file")
  return f"tag {tag!r} is not a {scheme} tag ({form}); {fix}"


def check_tags(tags: Iterable[str], scheme: str, where: str = "") -> None:
  """Refuses a tag outside `scheme`.

  Args:
    tags: tag strings, any number.
    scheme: a scheme name (any case).
    where: what holds the tags (e.g. "train.txt:12"), put before the message.

  Raises:
    ElectraError: the scheme is unknown, or a tag is not one of its tags; one line naming the
      tag, the scheme and the fix.
  """
  scheme = check_scheme(scheme)
  for tag in dict.fromkeys(tags):
    problem = tag_problem(tag, scheme)
    if problem:
      raise ElectraError(f"{where}: {problem}" if where else problem)


def check_sentences(sentences: Sequence[Sentence], scheme: str) -> None:
  """`check_tags` on every tagged sentence, naming the file and line of the first bad tag.

  Raises:
    ElectraError: as `check_tags`, with "path:line: " before the message.
  """
  scheme = check_scheme(scheme)
  seen: set[str] = set()
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags or ()):
      if tag not in seen:
        problem = tag_problem(tag, scheme)
        if problem:
          raise ElectraError(f"{sentence.where(i)}: {problem}")
        seen.add(tag)


def label_set(sentences: Sequence[Sentence], scheme: str) -> list[str]:
  """The labels of a training file: its distinct tags sorted, "O" first; label id = position.

  Under BIO, BIOES and IO "O" is always there (a model must be able to predict "outside");
  under NONE it is first only if the file has it.

  Raises:
    ElectraError: a tag is outside the scheme (`check_sentences`), or the sentences have no
      tags (an unlabeled file cannot be trained on).
  """
  scheme = check_scheme(scheme)
  check_sentences(sentences, scheme)
  tags = {tag for s in sentences for tag in (s.tags or ())}
  if not tags:
    where = sentences[0].path if sentences and sentences[0].path else "the training file"
    raise ElectraError(f"{where} has no tag column: a file to train on needs the tag in the "
                       "last column of each token line")
  if scheme != NONE:
    tags.add(OUTSIDE)
  rest = sorted(tags - {OUTSIDE})
  return [OUTSIDE] + rest if OUTSIDE in tags else rest


def spans(tags: Sequence[str], scheme: str) -> list[Span]:
  """The entities of one sentence's tags, as conlleval counts them (module docstring): seqeval's
  `get_entities` (its default mode, conlleval's rules).

  Args:
    tags: [num_words] tags of one sentence.
    scheme: the label scheme (any case); under NONE there are no entities.

  Returns:
    (type, start, end) per entity in order: words start..end-1 (end exclusive), e.g.
    spans(["B-PER", "I-PER", "O", "I-LOC"], "BIO") == [("PER", 0, 2), ("LOC", 3, 4)].

  Raises:
    ElectraError: a tag is outside the scheme (`check_tags`).
  """
  scheme = check_scheme(scheme)
  if scheme == NONE:
    return []
  tags = list(tags)
  check_tags(tags, scheme)
  from seqeval.metrics import sequence_labeling  # pylint: disable=import-outside-toplevel
  # seqeval's end is inclusive. A checked tag is O or a one-letter prefix, a hyphen and a type,
  # the form seqeval reads (prefix = first character, type = after the first hyphen).
  return [(kind, start, end + 1) for kind, start, end in sequence_labeling.get_entities(tags)]
