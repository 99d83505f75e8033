"""The `rerank` fine-tuning family: a cross-encoder (query, document) -> relevance score,
trained on (query, positive, negatives) rows and used to rerank a first-stage run."""
