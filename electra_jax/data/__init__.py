"""The pretraining data path: text -> tokenizer -> ELECTRA examples -> per-host batches.

Modules, one job each:
  documents     a document (a list of sentences), the `DocumentSource` interface, held-out splits.
  text_files    text files -> documents: cleanup hooks, document boundaries, counted skips;
  records       JSON Lines, Parquet, Arrow, datasets directories and hf: -> documents;
  compressed    .gz and .zst files read whole; tfds_source: tfds datasets -> documents;
  corpus        the embedded standard-library corpus.
  tokenizer/    sentencepiece, WordPiece and tokenizer.json behind one interface; training CLI.
  examples      the original ELECTRA example recipe ([CLS] A [SEP] B [SEP]); packing: rows
                holding several examples.
  recipe        the one example recipe (tokenizer and example settings) every path shares.
  sources/      the pretraining sources behind one `Source` interface, a module per kind
                (files, tfds, shards, mixture) and a registry.
  build         offline preprocessing into shards (`python -m electra_jax.data.build`; Beam:
                build_beam); shards: the shard format and manifest.
  shard_reader, streaming, loader, mixture
                reading on Grain: shards, streamed files, batches from a position, mixtures.
  pipeline      `config.data` -> `PretrainingData` (one source, its iterators).

Every `config.data` field is documented in `electra_jax/pretrain/default_config.py`.
"""
