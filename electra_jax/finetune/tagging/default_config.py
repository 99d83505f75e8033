r"""Every token-classification (NER, chunking, POS) setting (configs/tag.py uses it).

  python -m electra_jax.finetune --config=configs/tag.py --workdir=runs/ner_small \
      --config.init_checkpoint=runs/small --config.train_file=/data/conll2003/train.txt \
      --config.dev_file=/data/conll2003/dev.txt --config.test_file=/data/conll2003/test.txt

Fields left at -1 or "auto" take the original ELECTRA values for the checkpoint's size (small:
hidden size below 768; base: 768 up to 1023; large: 1024 and above): learning rate 3e-4 /
1e-4 / 5e-5, layer-wise decay 0.8 / 0.8 / 0.9, and 3 epochs, as for GLUE. The loss is the
original's (finetune/tagging/tagging_tasks.py): softmax cross-entropy on the first piece of
every word, summed over the batch's words.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py): "tag".
  config.task_family = "tag"
  # Pretrained weights: a pretraining --workdir (newest checkpoint), a checkpoints/<step>/ dir,
  # the output of `python -m electra_jax.convert from-hf`, or a fine-tuned token classifier (a
  # tag fine-tuning workdir or its tag/seed_<s>/model/) to continue fine-tuning or to predict
  # with. Required.
  config.init_checkpoint = ""
  # CoNLL-style training file: one token a line, its tag in the last column, a blank line
  # between sentences, -DOCSTART- lines skipped. Its tags are the label set (WORKDIR/
  # labels.json). "": train nothing, only predict with init_checkpoint, a fine-tuned token
  # classifier (its labels), writing WORKDIR/predict/.
  config.train_file = ""
  # Labeled CoNLL file scored after training (entity P/R/F1, token accuracy); it picks the
  # median seed. Required with train_file; optional when only predicting.
  config.dev_file = ""
  # CoNLL file to predict (tags optional: a one-column file is unlabeled; with tags it is
  # scored too, as test/*); "": none.
  config.test_file = ""
  # How tags encode entities: "BIO" (IOB2; IOB1 files read the same), "BIOES" (IOBES), "IO", or
  # "NONE" for tags without entity structure (POS: token accuracy only). Every file's tags are
  # checked against it.
  config.label_scheme = "BIO"
  # The dev metric that picks the median seed: "f1", "precision" or "recall" (entity level,
  # as conlleval), "accuracy" (token accuracy), or one entity type's, e.g. "f1/PER"; "auto":
  # "f1", or "accuracy" with label_scheme=NONE.
  config.metric = "auto"
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  config.max_seq_length = 128  # T: pieces per window, [CLS] and [SEP] included.
  # A sentence of more than max_seq_length - 2 pieces is split into windows, the next starting
  # doc_stride pieces later (less than max_seq_length - 2, so that windows overlap); each word
  # is predicted from the window where it has the most context.
  config.doc_stride = 64
  config.max_train_examples = 0  # Train on only the first N sentences; 0: all (demos, tests).
  config.max_eval_examples = 0  # Score only the first N dev sentences; 0: all.

  finetune_config.add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 3 (the original's).
  config.batch_size = 32  # Global training batch, in windows.
  config.eval_batch_size = 128  # Global batch of windows for prediction (last one padded).
  finetune_config.add_optimizer_fields(config)
  # Dropout on every position's hidden state before the tag layer (transformers'
  # ElectraForTokenClassification has it; the original has none: 0 gives that).
  config.head_dropout = 0.1
  # The tag layer's kernel initialiser: "glorot_uniform" (the original's tf.layers.dense
  # default) or "truncated_normal" (std = the encoder's initializer_range).
  config.head_init = "glorot_uniform"
  # How the per-word losses (cross-entropy on each word's first piece; other pieces, [CLS],
  # [SEP] and padding count nothing) make the batch loss: "sum" over every word of the batch
  # (the original's: its per-sentence sums, summed over the batch; with max_grad_norm=1 the
  # clipping is then active on nearly every step) or "mean" over those words (transformers').
  # The logged loss is the mean per word either way.
  config.loss_reduction = "sum"
  # The tag layer: "auto" continues the checkpoint's when init_checkpoint is a fine-tuned token
  # classifier with exactly the training file's labels, else starts fresh; "fresh": always a
  # fresh one; "checkpoint": the checkpoint's, or an error when it has none or other labels.
  config.init_head = "auto"
  finetune_config.add_encoder_fields(config)

  # Write each seed's fine-tuned encoder and tag layer to tag/seed_<s>/model/ (to predict with
  # or continue from, or for `python -m electra_jax.convert to-hf`:
  # ElectraForTokenClassification).
  config.save_model = True
  # seed, num_seeds, log_every_steps, checkpoint_every_steps, nonfinite_policy and the mesh, as
  # for GLUE.
  finetune_config.add_run_fields(config)
  return config
