"""The pretraining data path: text -> tokenizer -> ELECTRA examples -> batches.

Modules: `corpus` (reading text files, the embedded standard-library corpus, held-out
splits), `tokenizer` (sentencepiece training and the `Tokenizer` interface), `examples` (the
ELECTRA example recipe) and `pipeline` (`build_pretraining_data` and `BatchIterator`).

`build_pretraining_data` reads these `config.data` fields:
  train_files: comma-separated globs of UTF-8 text, one sentence per line, a blank line
    between documents; '' uses the embedded corpus, written to <workdir>/corpus/.
  eval_files: the same for evaluation text; '' holds out `eval_fraction` of the training
    documents instead.
  eval_fraction: share of training documents held out when eval_files is ''.
  tokenizer_model: a sentencepiece .model with [PAD] [UNK] [CLS] [SEP] [MASK]; '' trains one
    with model.vocab_size pieces on the training files into <workdir>/tokenizer/spm.model.
  lowercase: whether a newly trained tokenizer case-folds its input.
  max_seq_length: length T of every example.
  single_segment_prob, short_seq_prob: see `electra_jax.data.examples`.

"""
