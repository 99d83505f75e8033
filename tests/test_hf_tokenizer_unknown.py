"""The exported `tokenizer.json` gives electra-jax's ids for text outside the vocabulary.

A small sentencepiece model is trained here on plain ASCII English (lowercasing and keeping
case: the two normalization rules the trainer writes), so that accents, currency signs, emoji,
CJK, Arabic, Hebrew, combining marks, control and zero-width characters are all outside its
vocabulary; `AutoTokenizer` on the export must give electra-jax's ids for text full of them.
"""

import os
import random

import pytest
import sentencepiece as spm

from electra_jax.convert import hf_tokenizer
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data.tokenizer.base import CLS, MASK, PAD, SEP, UNK

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ("the a an of to in and or but not is was are were be been has have had do did will "
         "would can could may might must shall should this that these those it its they them "
         "their we our you your he she his her who what which when where why how all any each "
         "few more most other some such only own same so than too very just now then here there "
         "about above after again against below between into through during before under over "
         "film movie story actor scene plot music price money cost pay paid dollar cent euro "
         "city river house garden coffee tea bread water light night day year time world people "
         "good bad new old long short great small large big little early late young quick slow "
         "runs walks reads writes sings plays makes takes gives finds tells asks works seems "
         "feels becomes leaves calls tries needs wants likes loves hates hello list spaces extra "
         "mixed case digits").split()
PUNCTUATION = list(".,;:!?'\"-()/&%*+=<>@#_|~`^{}\\")


def english(seed=0, sentences=400):
  """Plain ASCII English sentences (a few KB): words, capitals, digits and punctuation, no
  brackets (the text of a special token becomes that token in Hugging Face tokenizers)."""
  rng = random.Random(seed)
  lines = []
  for _ in range(sentences):
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
    words[0] = words[0].capitalize()
    if rng.random() < 0.3:
      words.insert(rng.randrange(len(words)), str(rng.randint(0, 9999)))
    if rng.random() < 0.3:
      words.insert(rng.randrange(len(words)), rng.choice(WORDS).upper())
    lines.append(" ".join(words) + rng.choice(PUNCTUATION[:8]) + " " + "".join(
        rng.choice(PUNCTUATION) for _ in range(rng.randint(0, 2))))
  return lines


# Characters outside an English vocabulary, one class per entry (the random strings mix them).
OUTSIDE = {
    "accents": "éèêëàâäåæçñøœßÉÈÀÅÆÇÑØŒáíóúýÿıİ",
    "combining": "\u0300\u0301\u0302\u0303\u0308\u030a\u0323\u0327\u0338\u0345\u20dd\u0306",
    "currency": "$€¥£¢₹₩₽₿",
    "emoji": ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "🇯🇵", "❤\ufe0f", "🏳\ufe0f\u200d🌈", "🙂"],
    "cjk": "日本語中文漢字한국어ひらがなカタカナ",
    "kana_jamo": ["ｶﾞ", "ﾊﾟ", "か\u3099", "\u1100\u1161\u11a8", "ㅍㅝ", "ㄱㅏ"],
    "rtl": "مرحباשָׁלוֹםعربيעברית",
    "indic_thai": ["\u09c7\u09be", "हिन्दी", "ภาษาไทย", "\u0e33"],
    "greek_cyrillic": "ΑΣΩαβγδᾼᾳΆЖжЁё",
    "controls": "\t\n\r\x00\x01\x02\x03\x07\x1b\x7f\x85\x9f",
    "zero_width": "\u200b\u200c\u200d\u2060\ufeff",
    "spaces": "\u00a0\u2002\u2009\u202f\u3000\u1680",
    "compatibility": "ﬁﬃ½™℃ＡＢｚ①ⅻ𝐀𝕫～▁\ufffd",
    "newer_unicode": "\ua7f1\ua7f2\U0001e030\U0001ccd6\U000105d2",
}

CURATED = [
    "amélie", "$ 40", "the $ 40 film", "Amélie paid $40 for tea.", "naïve", "Ærøskøbing",
    "€5 and ¥100 and £3", "price: ¥", "I like 😀 and 👍🏽", "family 👨\u200d👩\u200d👧 here",
    "flags 🇫🇷🇯🇵 and ❤\ufe0f", "日本語のテキスト", "中文 and English", "한국어 text", "مرحبا بالعالم",
    "שָׁלוֹם", "tab\there", "bell\x07ring", "escape\x1b[0m codes", "nul\x00byte",
    "zero\u200bwidth", "joiner\u200dhere", "bom\ufeffthere", "no\u00a0break",
    "ideographic\u3000space",
    "é", "éé", "$$$", "€€ ¥¥", "é$€¥", "$ é € ¥", "éthe", "theé", "the é the", " é ", "  é  é  ",
    "é the", "the é", "\u0301", "\u0301the", "the\u0301", "e\u0301", "E\u0301", "A\u0308",
    "a\u0323\u0302", "Tie\u0302\u0301ng Vie\u0323\u0302t", "Ａ\u0301", "ﬃ\u0301", "½\u0301",
    "\u00a0\u0301", "\u00a0\u200d$", " \u0301the", "x\u0300\u0301\u0302\u0303y",
    "ᾼ and Α\u0313\u0345",
    "ｶﾞｷﾞ", "か\u3099", "\u1100\u1161\u11a8", "ㅍㅝ", "\u09c7\u09be", "\x07the", "the\x07", "\x07",
    "\x85the\x85", "～the～", "▁the ▁ the", "e\x07\u0301", "e\x00\u0301", "\ua7f1\u0301",
    "\U0001e030\u0308", "the\r\nfilm", "THE FILM", "MiXeD CaSe and digits 12345",
]

PAIRS = [("Amélie paid $ 40.", "Le café coûte 5 €."), ("日本語 👍🏽", "plain english words"),
         ("e\u0301 \x07 \u200d", "\u00a0\u0301 ﬃ\u0301"), ("", "only the second")]


def random_texts(seed, count=400):
  """Strings mixing printable ASCII (no brackets) with characters from every class above."""
  rng = random.Random(seed)
  ascii_chars = [c for c in map(chr, range(0x20, 0x7f)) if c not in "[]"]
  outside = [c for chars in OUTSIDE.values() for c in chars]
  texts = []
  for _ in range(count):
    share = rng.choice([0.2, 0.5, 0.8])
    texts.append("".join(rng.choice(outside) if rng.random() < share else rng.choice(ascii_chars)
                         for _ in range(rng.randint(1, 30))))
  return texts


def export(model_file, directory, lowercase=True):
  """`AutoTokenizer` on tokenizer.json and tokenizer_config.json exported for `model_file`."""
  os.makedirs(directory, exist_ok=True)
  hf_tokenizer.write_sentencepiece(model_file, str(directory), 128, lowercase)
  return transformers.AutoTokenizer.from_pretrained(str(directory))


@pytest.fixture(scope="module", params=[True, False], ids=["lowercase", "cased"])
def small(request, tmp_path_factory):
  """(electra-jax tokenizer, AutoTokenizer on its export, .model path, lowercase) of a
  300-piece model trained on `english()`."""
  root = tmp_path_factory.mktemp("spm")
  model = tokenizer_lib.train_sentencepiece([], str(root / "spm"), vocab_size=300,
                                            lowercase=request.param, sentences=english())
  return (tokenizer_lib.load_tokenizer(model), export(model, root / "hf", request.param), model,
          request.param)


def assert_same_ids(ours, hf, texts):
  got = hf(texts)["input_ids"]
  for text, ids in zip(texts, got, strict=True):
    assert ids == [ours.cls_id, *ours.encode(text), ours.sep_id], (
        text, [ours.id_to_piece(i) for i in ours.encode(text)], hf.convert_ids_to_tokens(ids))


def test_vocabulary_is_ascii_english(small):
  """The texts below hold characters outside the vocabulary: electra-jax gives [UNK] for them."""
  ours, _, _, _ = small
  pieces = {ours.id_to_piece(i) for i in range(ours.vocab_size)}
  assert all(p.replace("▁", "").isascii() for p in pieces) and "▁" in pieces
  with_unk = [text for text in CURATED if ours.unk_id in ours.encode(text)]
  assert len(with_unk) > len(CURATED) * 2 // 3


def test_unknown_characters_give_electra_jax_ids(small):
  """Accents, currency signs, emoji (ZWJ sequences, flags, skin tones), CJK, kana, Hangul,
  Arabic, Hebrew, combining marks, control and zero-width characters, odd spaces: alone, in
  runs, at either end, next to words and spaces; and one class per string."""
  ours, hf, _, _ = small
  texts = CURATED + [chars if isinstance(chars, str) else "".join(chars)
                     for chars in OUTSIDE.values()]
  texts += [f"the {c} film {c}{c} the{c}" for chars in OUTSIDE.values() for c in chars]
  assert_same_ids(ours, hf, texts)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_mixed_text_gives_electra_jax_ids(small, seed):
  ours, hf, _, _ = small
  assert_same_ids(ours, hf, random_texts(seed))


def test_pairs_give_electra_jax_ids_and_segments(small):
  ours, hf, _, _ = small
  for first, second in PAIRS + list(zip(random_texts(2, 50), random_texts(3, 50))):
    a, b = ours.encode(first), ours.encode(second)
    got = hf(first, second)
    assert got["input_ids"] == [ours.cls_id, *a, ours.sep_id, *b, ours.sep_id], (first, second)
    assert got["token_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)


def test_every_rewrite_rule_of_the_normalization(small, tmp_path):
  """Each text sentencepiece's charsmap rewrites (all 220,000-odd: NFKC's compositions and
  compatibility forms, case folding, the NMT rules), between NULs, spaces, words, accents, a
  control character, or right after another, normalizes as sentencepiece normalizes it; but
  one sequence sentencepiece itself rewrites inconsistently."""
  _, _, model, lowercase = small
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel
  proto = sentencepiece_model_pb2.ModelProto()
  with open(model, "rb") as f:
    proto.ParseFromString(f.read())
  rules = hf_tokenizer.charsmap_rules(proto.normalizer_spec.precompiled_charsmap)
  assert len(rules) > 200_000
  assert rules.get("\u00c4", "\u00c4") == ("\u00e4" if lowercase else "\u00c4")
  # U+1CCDE OUTLINED LATIN CAPITAL LETTER I + U+0307: sentencepiece rewrites it to U+0130, which
  # it rewrites to "i" + U+0307 when it lowercases.
  texts = [t for t in rules if not (lowercase and t == "\U0001ccde\u0307")]
  sp = spm.SentencePieceProcessor(model_file=model)
  normalizer = tokenizers.Tokenizer.from_str(
      hf_tokenizer.sentencepiece_tokenizer_json(model)).normalizer
  rng = random.Random(0)
  separators = ["\x00", "", "x", " ", " the ", "\u0301", "é", "\x07"]
  joined = "".join(text + rng.choice(separators) for text in texts)
  expected = sp.normalize(joined)
  got = "▁" + normalizer.normalize_str(joined).replace(" ", "▁")
  if got != expected:
    at = next((i for i, (e, g) in enumerate(zip(expected, got)) if e != g),
              min(len(expected), len(got)))
    pytest.fail(f"normalization differs from sentencepiece's at {at}: "
                f"{expected[at - 20:at + 20]!r} != {got[at - 20:at + 20]!r}")


def test_decoding(small):
  """Hugging Face decodes known characters as they were (normalized) and a run of unknown ones
  as [UNK]; electra-jax decodes them as sentencepiece's " ⁇ "."""
  ours, hf, _, lowercase = small
  text = "Amélie paid $ 40 for 日本語 tea."
  ids = hf(text)["input_ids"]
  expected = "am[UNK]lie paid [UNK] 40 for [UNK] tea." if lowercase else (
      "Am[UNK]lie paid [UNK] 40 for [UNK] tea.")
  assert hf.decode(ids) == f"{CLS} {expected}{SEP}"
  assert ours.decode(ids) == f"{CLS} {expected.replace('[UNK]', ' ⁇ ')} {SEP}"


def test_byte_fallback_model(tmp_path):
  """The trainer never writes byte-fallback models, but electra-jax loads one trained
  elsewhere (with its special tokens): its unknown characters become byte pieces, in the
  export too, and decode back."""
  prefix = str(tmp_path / "bytes")
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(english()), model_prefix=prefix, model_type="unigram",
      vocab_size=500, normalization_rule_name="nmt_nfkc_cf", pad_id=0, pad_piece=PAD, unk_id=1,
      unk_piece=UNK, bos_id=-1, eos_id=-1, control_symbols=[CLS, SEP, MASK], byte_fallback=True,
      minloglevel=2)
  ours = tokenizer_lib.load_tokenizer(prefix + ".model")
  hf = export(prefix + ".model", tmp_path / "hf")
  texts = CURATED + random_texts(4, 200)
  assert_same_ids(ours, hf, texts)
  assert [ours.id_to_piece(i) for i in ours.encode("é")] == ["▁", "<0xC3>", "<0xA9>"]
  for text in ["Amélie paid $ 40 for 日本語 tea.", "👨\u200d👩\u200d👧 ½ ﬁne"]:
    ids = hf(text)["input_ids"]
    assert hf.decode(ids, skip_special_tokens=True) == ours.decode(ours.encode(text))


def test_charsmap_round_trip():
  """`build_charsmap` writes what `charsmap_rules` reads back and `tokenizers` applies."""
  rules = {"a": "b", "ab": "", "é": "e", "\U0001f600": "smile", "x\u0301": "\u1e8b", "\x07": ""}
  charsmap = hf_tokenizer.build_charsmap(rules)
  assert hf_tokenizer.charsmap_rules(charsmap) == rules
  precompiled = tokenizers.normalizers.Precompiled(charsmap)
  assert [precompiled.normalize_str(c) for c in ["a", "é", "\U0001f600", "z", "b\x07"]] == [
      "b", "e", "smile", "z", "b"]
