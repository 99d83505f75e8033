"""The pretraining data path: text -> tokenizer -> ELECTRA examples -> per-host batches.

Modules, one job each:
  fileio      local and gs:// file access (tf.io.gfile for URLs), atomic writes.
  text_files  text files -> documents: cleanup hooks, document boundaries, counted skips.
  tfds_source tfds datasets -> documents, streamed and evenly sharded.
  corpus      the embedded standard-library corpus; held-out document splits.
  tokenizer   sentencepiece and WordPiece tokenizers behind one interface; training CLI.
  examples    the original ELECTRA example recipe ([CLS] A [SEP] B [SEP]).
  build       offline preprocessing into shards (`python -m electra_jax.data.build`).
  shards      the shard format and the host-sharded, window-shuffled, resumable reader.
  pipeline    `config.data` -> tokenizer, examples and train/eval iterators.
  glue        GLUE tasks: TSV and tfds readers, featurization, submission files.

Every `config.data` field is documented in `electra_jax/pretrain/default_config.py`.
"""
