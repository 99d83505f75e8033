r"""Every SQuAD fine-tuning setting, with the original ELECTRA recipe (configs/squad.py uses it).

  python -m electra_jax.finetune --config=configs/squad.py --workdir=runs/squad_small \
      --config.init_checkpoint=runs/small --config.task=squad2 --config.data_dir=/data/squad

Fields left at -1 or "auto" take the original ELECTRA values for the checkpoint's size (small:
hidden size below 768; base: 768 up to 1023; large: 1024 and above): learning rate 3e-4 /
1e-4 / 5e-5 (the paper's Table 7), layer-wise decay 0.8 / 0.8 / 0.9, and 2 epochs. The rest
is the original code's (finetune/qa/qa_tasks.py, configure_finetuning.py): see
docs/FIDELITY.md.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py): "squad".
  config.task_family = "squad"
  config.task = "squad1"  # "squad1" (SQuAD 1.1) or "squad2" (2.0: unanswerable questions too).
  # Pretrained weights: a pretraining --workdir (newest checkpoint), a checkpoints/<step>/ dir,
  # or the output of `python -m electra_jax.convert from-hf`. Required.
  config.init_checkpoint = ""
  # "json": the official files in data_dir (train-v1.1.json, dev-v1.1.json, train-v2.0.json,
  # dev-v2.0.json); "tfds": squad/v1.1 or squad/v2.0, prepared beforehand.
  config.data_source = "json"
  config.data_dir = ""  # data_source=json: the folder holding the official SQuAD JSON files.
  config.tfds_data_dir = ""  # data_source=tfds: prepared tfds data; "": TFDS_DATA_DIR/default.
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  config.max_seq_length = 512  # T: tokens per window, [CLS] question [SEP] context [SEP].
  config.max_query_length = 64  # Questions longer than this many tokens are truncated.
  config.doc_stride = 128  # Tokens between the starts of a long context's windows.
  config.max_train_examples = 0  # Train on only the first N questions; 0: all (demos, tests).
  config.max_eval_examples = 0  # Evaluate on only the first N dev questions; 0: all.

  # Answer heads (the original's defaults).
  # End position predicted given the start (dense(512, GELU) over [h_start; h_end]); False:
  # start and end independent, the layout of transformers' ElectraForQuestionAnswering.
  config.joint_prediction = True
  config.beam_size = 20  # joint_prediction: starts, and ends per start, kept when predicting.
  config.answerable_classifier = True  # squad2: a no-answer logit trained on is_impossible.
  # The no-answer logit also sees the start-probability-weighted hidden state (and a
  # dense(512, GELU) layer); False: dense(1) on the [CLS] state alone.
  config.answerable_uses_start_logits = True
  config.answerable_weight = 0.5  # Weight of the no-answer loss in the window's loss.
  config.n_best_size = 20  # Candidate spans per question kept in nbest_predictions.json.
  config.max_answer_length = 30  # Longest answer predicted, in tokens.
  # squad2: how the no-answer threshold on the null odds is chosen: "best_f1" or
  # "best_exact" (the threshold that maximises that dev score, as the official 2.0 script's
  # best_f1_thresh), or "fixed" (null_threshold below).
  config.null_threshold_policy = "best_f1"
  # With null_threshold_policy=fixed: answer "" when the null odds exceed this. -2.75 is the
  # original's qa_na_threshold (for the answerability logit).
  config.null_threshold = -2.75

  finetune_config.add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 2 (the original's for SQuAD).
  config.batch_size = 32  # Global training batch, in windows.
  config.eval_batch_size = 32  # Global batch of windows for dev prediction (last one padded).
  finetune_config.add_optimizer_fields(config)
  # The heads' kernel initialiser: "glorot_uniform" (the original's tf.layers.dense default)
  # or "truncated_normal" (std = the encoder's initializer_range).
  config.head_init = "glorot_uniform"
  # How per-window losses make the batch loss: "sum" (the original's reduce_sum) or "mean".
  config.loss_reduction = "sum"
  finetune_config.add_encoder_fields(config)

  # Write each seed's fine-tuned encoder and heads to <task>/seed_<s>/model/ (for
  # `python -m electra_jax.convert to-hf`, e.g. ElectraForQuestionAnswering).
  config.save_model = True
  # seed, num_seeds, log_every_steps, checkpoint_every_steps, nonfinite_policy and the mesh, as
  # for GLUE.
  finetune_config.add_run_fields(config)
  return config
