"""Fine-tuning on one's own files: sentence(-pair) classification, regression and multilabel.

  data.py            reading csv / tsv / jsonl files into examples and a label set
  default_config.py  every field of configs/classify.py
  metrics.py         each problem's metrics and the one that picks the median seed
  task.py            `ClassifyTask`: seeds, metrics, predictions.jsonl, saved models
"""
