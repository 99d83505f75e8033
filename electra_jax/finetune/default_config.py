r"""Every GLUE fine-tuning setting, with the original ELECTRA recipe (configs/glue.py uses it).

  python -m electra_jax.finetune --config=configs/glue.py --workdir=runs/glue_small \
      --config.init_checkpoint=runs/small --config.data_dir=/data/glue --config.task=sst2,cola

Fields left at -1 or "auto" take the original ELECTRA values for the checkpoint's size (small:
hidden size below 768; base: 768 up to 1023; large: 1024 and above): learning rate 3e-4 / 1e-4
/ 5e-5, layer-wise decay 0.8 / 0.8 / 0.9, and 3 epochs (10 for RTE and STS-B).

Small's 3e-4 is the paper's (Table 7), which its GLUE scores were fine-tuned with; the released
code's default for every size but Large is 1e-4 (--config.learning_rate=1e-4 gives that). The
rest of the recipe is the original code's: see docs/FIDELITY.md.
"""

import ml_collections

from electra_jax.pretrain import default_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py):
  # "glue" (this config), "squad" (configs/squad.py), "classify" (configs/classify.py) or "tag"
  # (configs/tag.py).
  config.task_family = "glue"
  # Comma-separated GLUE tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli; "ax" (the
  # diagnostic set) is predicted by the MNLI model whenever mnli is fine-tuned.
  config.task = "sst2"
  # Pretrained weights: a pretraining --workdir (newest checkpoint), a checkpoints/<step>/ dir,
  # or the output of `python -m electra_jax.convert from-hf`. Required.
  config.init_checkpoint = ""
  config.data_source = "tsv"  # "tsv": the classic GLUE layout under data_dir; "tfds": glue/*.
  config.data_dir = ""  # data_source=tsv: GLUE root with CoLA/, SST-2/, MRPC/, ... folders.
  config.tfds_data_dir = ""  # data_source=tfds: prepared tfds data; "": TFDS_DATA_DIR/default.
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  config.max_seq_length = 128  # T: tokens per example, [CLS] A [SEP] B [SEP] included.
  config.max_train_examples = 0  # Use only the first N training examples; 0: all (demos, tests).
  config.max_eval_examples = 0  # Evaluate on only the first N dev examples; 0: all.

  add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 3, or 10 for RTE and STS-B.
  config.batch_size = 32  # Global training batch.
  config.eval_batch_size = 128  # Global batch for dev/test prediction (last batch is padded).
  add_optimizer_fields(config)
  config.head_dropout = 0.1  # Dropout on the [CLS] hidden state before the task head.
  # The task head's kernel initialiser: "glorot_uniform" (the original's tf.layers.dense
  # default) or "truncated_normal" (std = the encoder's initializer_range).
  config.head_init = "glorot_uniform"
  # How per-example losses make the batch loss: "sum" (the original's reduce_sum; with
  # max_grad_norm=1 the clipping is then active on nearly every step) or "mean".
  config.loss_reduction = "sum"
  # MRPC and STS-B also train on every pair with its sentences swapped (train split only), as
  # the original's double_unordered.
  config.double_unordered = True
  # STS-B trains on score / 5 in [0, 1], as the original; predictions are mapped back to
  # [0, 5] for metrics and submission files.
  config.normalize_regression_targets = True
  add_encoder_fields(config)

  config.write_test_predictions = True  # Write GLUE submission files for the test splits.
  add_run_fields(config)
  return config


def add_recipe_fields(config: ml_collections.ConfigDict) -> None:
  """The learning-rate recipe every task shares (-1 / "auto": the original's, the learning rate
  by the model's size, the layer decay by its depth)."""
  config.model_size = "auto"  # small, base or large learning rate; "auto": from the hidden size.
  config.learning_rate = -1.0  # Peak learning rate; -1: 3e-4 small, 1e-4 base, 5e-5 large.
  # Per-layer learning-rate factor; 1: off. -1: by the encoder's depth, 0.8 up to 15 layers and
  # 0.9 from 16 (the original's 0.8 for its 12-layer Small and Base, 0.9 for its 24-layer Large;
  # docs/finetuning.md says why 16).
  config.layerwise_lr_decay = -1.0
  # The original code's layer-wise decay has one extra factor (top layer decay^2, embeddings
  # decay^(L+2)); False uses the intended decay^1 ... decay^(L+1). True reproduces the original.
  config.original_layer_decay = False


def add_optimizer_fields(config: ml_collections.ConfigDict) -> None:
  """The optimizer settings every task shares (the original's AdamW, warmup and clipping)."""
  config.warmup_fraction = 0.1  # Share of the training steps spent warming up.
  config.weight_decay = 0.01  # AdamW decoupled weight decay (not on LayerNorm or biases).
  config.adam_b1 = 0.9  # Adam beta1.
  config.adam_b2 = 0.999  # Adam beta2.
  config.adam_eps = 1e-6  # Adam epsilon.
  config.adam_bias_correction = False  # False: the original's AdamW (no bias correction).
  config.max_grad_norm = 1.0  # Clip gradients to this global norm; 0 disables clipping.
  # Split each training batch into this many microbatches, run in sequence inside the step
  # (one scan), their gradients summed before the one update: the same update as the whole
  # batch at a K-th of its activation memory. batch_size must be a multiple of K x the batch
  # shards. With dropout each microbatch draws its own masks.
  config.grad_accum_steps = 1


def add_encoder_fields(config: ml_collections.ConfigDict) -> None:
  """How the pretrained encoder runs while fine-tuning, for every task."""
  config.hidden_dropout_prob = 0.1  # Encoder dropout (embeddings and residual branches).
  config.attention_dropout_prob = 0.1  # Encoder dropout on attention probabilities.
  config.dtype = "float32"  # Compute dtype: float32 or bfloat16 (parameters stay float32).
  # Attention implementation, as model.attention in pretraining ("auto": the platform's fused
  # kernel when attention_dropout_prob is 0, else "xla"); the checkpoint's choice is not used.
  config.attention = "auto"
  # Pack each batch's examples back to back into fewer rows of max_seq_length (the same
  # examples a step; electra_jax/finetune/batches.py): no compute on padding, and the same
  # logits, losses and predictions as padded rows (within float rounding; dropout draws its
  # masks over other shapes, so runs with dropout agree in distribution). One host only.
  config.packing = False


def add_run_fields(config: ml_collections.ConfigDict) -> None:
  """The fields of how a fine-tuning job runs, shared by every task's config (GLUE, SQuAD)."""
  config.seed = 0  # First seed (head init, dropout, data order).
  config.num_seeds = 1  # Seeds seed..seed+num_seeds-1 are run; the report gives each and the median.
  config.log_every_steps = 100  # Steps between progress lines and metric writes.
  # Steps between checkpoints of a running seed (resumed after a crash, deleted when the seed
  # is done); 0: checkpoint only when a preemption is announced.
  config.checkpoint_every_steps = 0
  # A step whose loss or gradients are not finite is never applied; "stop": end the seed with
  # an error naming the step; "skip": go on without it (counted as train/nonfinite_steps).
  config.nonfinite_policy = "stop"

  # Mesh and logical-axis rules, exactly as in pretraining (see electra_jax/pretrain/default_config.py).
  config.mesh = default_config.get_config().mesh
