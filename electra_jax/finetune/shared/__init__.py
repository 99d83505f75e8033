"""Helpers that several fine-tuning families use (and no family owns):

  pairs.py    sentence(-pair) `Example`s and their `[CLS] A [SEP] B [SEP]` rows (glue, classify)
  windows.py  sliding windows and each token's max-context window (qa, tagging)
  labels.py   labels.json, a classifier's or tagger's label set (classify, tagging)
"""
