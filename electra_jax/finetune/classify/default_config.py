r"""Every setting of fine-tuning on one's own files (configs/classify.py uses it).

  python -m electra_jax.finetune --config=configs/classify.py --workdir=runs/reviews \
      --config.init_checkpoint=runs/small --config.train_file=train.csv \
      --config.dev_file=dev.csv --config.test_file=test.csv \
      --config.text_fields=review --config.label_field=sentiment

The recipe is GLUE's (the original ELECTRA's, see electra_jax/finetune/default_config.py):
fields left at -1 or "auto" take the values of the checkpoint's size, and 3 epochs.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py):
  # "classify".
  config.task_family = "classify"
  # Pretrained weights: a pretraining --workdir (newest checkpoint), a checkpoints/<step>/ dir,
  # the output of `python -m electra_jax.convert from-hf` (a pretrained or a fine-tuned model),
  # or a fine-tuning workdir of this config (its median seed's model). Required.
  config.init_checkpoint = ""
  # The files, local or gs://: csv or tsv with a header row, or JSON Lines (one object per
  # line). train_file's labels make the label set; "" trains nothing and predicts with a
  # fine-tuned init_checkpoint (its head and labels).
  config.train_file = ""
  config.dev_file = ""  # Scored after training (required when training).
  config.test_file = ""  # Optional; labels optional: predictions.jsonl for every row.
  config.file_format = ""  # "csv", "tsv" or "jsonl" for every file; "": by each extension.
  # "classification" (one label per row, softmax), "regression" (a number, squared error) or
  # "multilabel" (a set of labels per row, a sigmoid per label, 0.5 threshold).
  config.problem = "classification"
  # One text field, or two separated by a comma (a pair: [CLS] A [SEP] B [SEP]).
  config.text_fields = "text"
  config.label_field = "label"  # The label column or key (a JSON list for multilabel jsonl).
  config.id_field = ""  # The id column repeated in predictions; "": the row's line number.
  config.label_separator = ","  # Multilabel csv/tsv: what separates a row's labels.
  # The dev metric that picks the median seed: accuracy, macro_f1 or mcc (classification);
  # pearson, spearman or mse (regression); micro_f1 or macro_f1 (multilabel). "": accuracy,
  # spearman and micro_f1 respectively.
  config.metric = ""
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  config.max_seq_length = 128  # T: tokens per example, [CLS] A [SEP] B [SEP] included.
  config.max_train_examples = 0  # Use only the first N training rows kept; 0: all.
  config.max_eval_examples = 0  # Score only the first N dev rows kept; 0: all.

  finetune_config.add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 3.
  config.batch_size = 32  # Global training batch.
  config.eval_batch_size = 128  # Global batch for dev/test prediction (last batch is padded).
  finetune_config.add_optimizer_fields(config)
  # The head on [CLS]: "hf" (dense(H) -> GELU -> dense(labels), transformers'
  # ElectraForSequenceClassification: `convert to-hf` exports it; on a modern encoder
  # ModernBERT's dense(H) -> GELU -> LayerNorm -> dense(labels), exported as
  # ModernBertForSequenceClassification) or "original" (dense(labels) alone, the original
  # ELECTRA's and GLUE's: the same run as the built-in tasks).
  config.head = "hf"
  # What the "hf" head reads: "cls" (the [CLS] state) or "mean" (the mean over the real tokens,
  # ModernBERT's classifier_pooling="mean"; modern encoder only).
  config.pooling = "cls"
  config.head_dropout = 0.1  # Dropout on the [CLS] hidden state (and inside the "hf" head).
  # The head's kernel initialiser: "glorot_uniform" (the original's tf.layers.dense default)
  # or "truncated_normal" (std = the encoder's initializer_range, transformers' choice).
  config.head_init = "glorot_uniform"
  # With a fine-tuned init_checkpoint: "auto" continues its head when its problem and labels
  # equal the training file's (else a fresh head), "checkpoint" requires that, "fresh" never.
  config.init_head = "auto"
  # How per-example losses (cross-entropy; squared error; the mean over labels of the sigmoid
  # cross-entropy) make the batch loss: "sum" (the original's reduce_sum) or "mean".
  config.loss_reduction = "sum"
  # Regression trains on (y - min) / (max - min) of the training targets (the original's
  # STS-B scaling, score / 5, for 0..5 scores) and maps outputs back; False: raw targets.
  config.normalize_regression_targets = True
  finetune_config.add_encoder_fields(config)

  # Write each seed's fine-tuned model to classify/seed_<s>/model/ (for convert to-hf, a later
  # fine-tuning, or prediction with train_file="").
  config.save_model = True
  # seed, num_seeds, log_every_steps, checkpoint_every_steps, nonfinite_policy and the mesh, as
  # for GLUE.
  finetune_config.add_run_fields(config)
  return config
