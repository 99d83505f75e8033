r"""Subword tokenizers: sentencepiece, WordPiece and Hugging Face tokenizer.json files, trained
here or loaded, with one interface.

Modules: `base` (the interface, special tokens), `sentencepiece_model`, `hf_backed` (the
base of the kinds Hugging Face `tokenizers` encodes), `wordpiece`, `tokenizer_json`,
`training` (training on text files), `loading` (`load_tokenizer`), `__main__` (the command).

Three kinds of vocabulary, picked by `--config.data.tokenizer_type` (see `load_tokenizer`):

* sentencepiece (`SentencePieceTokenizer`, also called `Tokenizer`): a unigram language model
  (sentencepiece's default, the algorithm of T5/ALBERT) in a `.model` file, which trains fast on
  a few MB. Normalisation (NFKC, optionally case folding) is stored in the model.
* WordPiece (`WordPieceTokenizer`): a BERT-style `vocab.txt`, one token per line and the id of
  a token its line number, e.g. BERT uncased, the vocabulary of every released ELECTRA
  checkpoint. Encoding is done by Hugging Face `tokenizers` with BERT's normalizer (lowercasing
  and accent stripping for uncased vocabularies), BERT's pre-tokenizer (split on whitespace and
  punctuation) and greedy longest-match-first WordPiece.
* tokenizer.json (`TokenizerJsonTokenizer`, kind "tokenizer_json"): a Hugging Face fast
  tokenizer's file with a BPE model (byte-level BPE as ModernBERT and RoBERTa ship) or a
  WordPiece one, encoded by `tokenizers` with the file's own normalizer and pre-tokenizer
  (loaded only; nothing here trains one). Its special tokens may have BERT's names or
  RoBERTa's (<pad> <unk> <s> </s> <mask>).

All offer `kind`, `model_file`, `vocab_size`, the special ids `pad_id`, `unk_id`, `cls_id`,
`sep_id`, `mask_id`, and `encode`, `encode_batch`, `decode`, `id_to_piece` and
`starts_word_table`.

Every vocabulary holds the special tokens `SPECIAL_TOKENS` = [PAD] [UNK] [CLS] [SEP] [MASK].
Trained ones have them at ids 0..4; a loaded WordPiece vocabulary may have them anywhere (BERT
uncased: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103). Text never encodes to [PAD],
[CLS], [SEP] or [MASK], so a corpus that mentions "[SEP]" or "[MASK]" cannot forge segment
boundaries or masks: in sentencepiece they are *control* symbols, BERT's pre-tokenizer splits
"[MASK]" in text into '[', 'mask', ']', and a tokenizer.json's special tokens are not matched
in text. Sentencepiece's <s>/</s> are disabled.

As a command (`python -m electra_jax.data.tokenizer train ...`, see `__main__`), trains a
tokenizer once for several pretraining runs.
"""

# pylint: disable=unused-import
from electra_jax.data.tokenizer.base import (
    AUTO, CLS, LOAD_KINDS, MASK, MAX_SENTENCE_BYTES, MAX_WORD_CHARS, PAD, SENTENCEPIECE, SEP,
    SPECIAL_TOKENS, TOKENIZER_JSON, TOKENIZER_JSON_FILE, TOKENIZER_KINDS, UNK, WORDPIECE,
    WORDPIECE_PREFIX, SubwordTokenizer)
from electra_jax.data.tokenizer.hf_backed import HfBackedTokenizer
from electra_jax.data.tokenizer.loading import kind_of_file, load_tokenizer
from electra_jax.data.tokenizer.sentencepiece_model import SentencePieceTokenizer, Tokenizer
from electra_jax.data.tokenizer.tokenizer_json import TokenizerJsonTokenizer
from electra_jax.data.tokenizer.training import (
    LongLines, count_long_lines, count_long_sentences, train_sentencepiece, train_wordpiece)
from electra_jax.data.tokenizer.wordpiece import WordPieceTokenizer
