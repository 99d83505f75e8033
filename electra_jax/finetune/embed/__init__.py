"""The `embed` fine-tuning family: sentence embeddings trained contrastively (`model`: pooling,
normalisation, the `Embedder` module and `TextEmbedder` for any checkpoint)."""
