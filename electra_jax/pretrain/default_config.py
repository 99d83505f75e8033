"""Every pretraining setting, with ELECTRA-Small's values from the paper and original code.

`configs/*.py` start from `get_config()` and change what differs per size. Any field can be
overridden on the command line, e.g. `--config.train.learning_rate=1e-4`; a field that does
not exist is an error. The `model` fields (the encoders' architecture) come from
`electra_jax.models.default_config`, where checkpoint loading reads them too.
"""

import ml_collections

from electra_jax.models import default_config as model_default_config


def get_config() -> ml_collections.ConfigDict:
  """ELECTRA-Small (14M-parameter discriminator), as trained in the paper."""
  config = ml_collections.ConfigDict()
  config.seed = 0  # Seeds parameter init, masking, sampling, dropout and data order.

  # Continued pretraining (electra_jax/pretrain/continued.py; docs/continued-pretraining.md):
  # start from the weights of a pretraining workdir, a checkpoints/<step>/ directory or a
  # `python -m electra_jax.convert from-hf|from-tf|extend-vocab` output (local or gs://), with a
  # fresh optimizer, step, schedule and data position. The model's shape (config.model's sizes,
  # layers, heads, vocabulary, generator size, weight sharing) and the tokenizer come from the
  # checkpoint; a size set on the command line that differs is an error. "": from scratch.
  config.init_checkpoint = ""
  # init_checkpoint's generator: "checkpoint" (take it; refused when it has none of this
  # objective's kind) or "fresh" (a new generator of the configured model.generator_* size).
  config.init_generator = "checkpoint"
  # data.max_seq_length beyond init_checkpoint's position table: "none" (refused) or "copy"
  # (tile its learned rows to the new length, as Longformer initialised its longer tables).
  config.init_extend_positions = "none"

  # The encoders' architecture: electra_jax/models/default_config.py documents its fields.
  config.model = model_default_config.get_config()

  objective = config.objective = ml_collections.ConfigDict()
  # Pretraining objective (electra_jax/pretrain/objectives): "electra" (replaced-token
  # detection), "electra_15" (its loss only over the masked positions), "mlm" (BERT),
  # "replace_mlm" (MLM on generator-corrupted inputs), "all_tokens_mlm" (Replace MLM predicting
  # every token, with a copy gate), "electric" (an energy-based cloze model trained by noise-
  # contrastive estimation against a two-tower noise model of the generator's size; see
  # electra_jax/pretrain/objectives/electric.py).
  objective.name = "electra"
  # Share of real tokens the generator predicts (electric: replaces; also its noise share rho).
  objective.mask_prob = 0.15
  objective.max_predictions = -1  # Masked slots per sequence; -1: int((mask_prob+0.005)*T).
  # Chosen positions shown as [MASK]; the rest stay as is (electric shows no [MASK]).
  objective.mask_token_prob = 0.85
  objective.random_token_prob = 0.0  # Chosen positions shown as a random token (BERT: 0.1).
  # How masked positions are drawn: "without_replacement" (exactly round(mask_prob * tokens)
  # distinct positions) or "with_replacement" (the original's independent draws, repeats
  # dropped: slightly fewer positions; see electra_jax/pretrain/objectives/ops.py).
  objective.masking_sampler = "without_replacement"
  # What one masking decision covers: "token" (each piece alone, as the original ELECTRA),
  # "whole_word" (all pieces of a word together, BERT's whole-word masking) or "span" (spans
  # of whole words, SpanBERT's). Words come from the tokenizer's pieces (WordPiece: "##"
  # continues a word; sentencepiece: a piece without the leading "▁" does; byte-level BPE
  # tokenizer.json: one without the leading "Ġ"). The other modes still cover mask_prob of the
  # tokens (in expectation) and take masking_sampler's default.
  objective.masking = "token"
  objective.span_p = 0.2  # masking=span: lengths in words ~ Geometric(span_p) (SpanBERT: 0.2),
  objective.span_max_words = 10  # clipped at this many words (SpanBERT: 10).
  # Where replacements come from (electra, electra_15, replace_mlm, all_tokens_mlm; electric
  # takes only "learned", its two-tower noise model): "learned"
  # (the generator network), "uniform" (any non-special id), "unigram" (the training data's
  # token frequencies, counted once and stored in the workdir / shard directory).
  objective.generator = "learned"
  objective.gen_weight = 1.0  # Weight of the generator's MLM loss (electric: the cloze loss).
  objective.disc_weight = 50.0  # Weight of the discriminator's loss (electric: the NCE loss).
  objective.temperature = 1.0  # Temperature of the generator's sampling softmax.
  objective.disallow_correct = False  # True: never sample the original token.

  data = config.data = ml_collections.ConfigDict()
  # Where examples come from: "text" (train_files, or the embedded corpus, built in memory at
  # startup), "tfds" (a tfds dataset, in memory) or "shards" (built offline by
  # `python -m electra_jax.data.build`; for corpora larger than memory).
  data.source = "text"
  # source=text: comma-separated globs, local or gs://; "": the embedded corpus. Text files
  # (one sentence a line), or records, each a document (electra_jax/data/records.py): JSON Lines
  # (.jsonl, .jsonl.gz, .jsonl.zst), Parquet, Arrow, or a datasets save_to_disk directory.
  data.train_files = ""
  # source=text: True streams train_files on Grain as training goes: each piece of the corpus (a
  # record file, or 8 MB of a text file) read, tokenized and built into examples when it is
  # needed, in the loader's workers (electra_jax/data/streaming.py); needs tokenizer_model.
  # False: read and build everything at startup, in memory.
  data.streaming = False
  data.eval_files = ""  # source=text: held-out text files; "": hold out eval_fraction of documents.
  data.eval_fraction = 0.02  # source=text/tfds: share of documents held out when none are given.
  data.text_cleanup = "none"  # Cleanup of each file's (or record's) text: "none" or "gutenberg".
  data.document_boundary = "blank_line"  # "blank_line" ends a document; "file": one per file.
  data.max_line_chars = 20_000  # Longer lines are skipped and counted (almost always junk).
  data.text_field = "text"  # Records: the field with the text ("a/b": nested).
  # Weighted sources instead of train_files: "W:SOURCE,W:SOURCE" (weight first; a SOURCE is a
  # glob of text or record files, "|" joining several, a datasets directory, hf:NAME,
  # tfds:NAME[@SPLIT] or shards:DIR). Batches hold each source's share of rows exactly over every
  # 100 batches (electra_jax/data/mixture.py); with data.streaming its file sources stream.
  # "": off.
  data.mixture = ""
  data.tfds_name = ""  # source=tfds: dataset name, e.g. "wikipedia/20230601.en".
  data.tfds_split = "train"  # source=tfds: split to train on.
  data.tfds_eval_split = ""  # source=tfds: split to evaluate on; "": hold out eval_fraction.
  data.tfds_text_feature = "text"  # source=tfds: the text feature ("a/b" for nested ones).
  data.tfds_data_dir = ""  # source=tfds: where it is prepared; "": TFDS_DATA_DIR or the default.
  data.tfds_max_documents = 200_000  # source=tfds: read at most this many documents; 0: all.
  data.shards_dir = ""  # source=shards: directory written by electra_jax.data.build.
  data.shuffle_buffer = 10_000  # source=shards: examples per shuffle window (memory bound).
  # source=shards (and shard sources of a mixture): "window" (shards in a seeded order, read
  # sequentially, each window of shuffle_buffer examples dealt shuffled: the fastest) or
  # "global" (a seeded permutation of every example of the host's shards, new each epoch: one
  # random read per example) (electra_jax/data/shard_reader.py).
  data.shard_order = "window"
  # Worker processes that make the batches on Grain (read, decode, build examples), each a
  # batch in W; 0: threads of the training process. The batches are the same for any count.
  data.loader_workers = 0
  # Threads per process reading batches ahead; 0: none (train.prefetch_batches reads ahead of
  # the step anyway; threads help when a batch is slow to make, e.g. data.streaming's pieces).
  data.loader_threads = 0
  # "sentencepiece", "wordpiece", "tokenizer_json" or "auto" (*.txt WordPiece, *.json a
  # Hugging Face tokenizer.json, else sentencepiece).
  data.tokenizer_type = "auto"
  # spm .model, WordPiece vocab.txt or tokenizer.json; "": train spm into WORKDIR.
  data.tokenizer_model = ""
  # Lowercase text (a new sentencepiece model; WordPiece: BERT uncased); a tokenizer.json
  # normalizes as the file says and ignores it.
  data.lowercase = True
  data.max_seq_length = 128  # T: tokens per example, [CLS] and [SEP]s included.
  data.single_segment_prob = 0.1  # Share of examples with one segment instead of A and B.
  data.short_seq_prob = 0.05  # Chance that the next example targets a random shorter length.
  # Several examples back to back in each row (electra_jax/data/packing.py): positions restart
  # and attention stays within each example (the input mask numbers them), so short examples
  # stop costing a whole row. Off in the paper's recipe, on in the modern_* presets. Shards:
  # build them with --packing (packing happens when the examples are built).
  data.packing = False

  train = config.train = ml_collections.ConfigDict()
  train.batch_size = 128  # Global batch (sequences per step, over all devices).
  # Gradient accumulation: the global batch runs as this many microbatches of
  # batch_size / grad_accum_steps sequences in sequence inside one jitted step (a scan), their
  # gradients summed in float32 before one optimizer update. The step computes the same
  # function for every value (same corrupted inputs, whole-batch losses); it lowers the
  # activation memory per chip K-fold at the cost of K smaller matmuls. 1: off.
  train.grad_accum_steps = 1
  train.num_train_steps = 1_000_000  # Optimizer steps (sets the learning-rate schedule).
  train.stop_at_step = 0  # Stop early at this step with a checkpoint (schedule unchanged); 0: off.
  # How the ELECTRA objectives train the generator: "joint" (with the discriminator, the
  # paper's ELECTRA), "two_stage" (the generator alone for generator_steps, then the
  # discriminator, initialised from it, with the generator frozen; same sizes required) or
  # "adversarial" (the generator maximises the discriminator's loss).
  train.algorithm = "joint"
  train.generator_steps = 0  # two_stage: steps of the generator-only first phase.
  # adversarial: "reinforce" (policy gradient with a learned per-token baseline, the paper's
  # appendix F) or "straight_through" (straight-through Gumbel-softmax).
  train.adversarial_estimator = "reinforce"
  # adversarial: weight of the generator's MLM loss by step: "none" (0), "constant:W" or
  # "linear:STEPS" (from 1 = pure maximum likelihood down to 0 = pure adversarial at STEPS).
  train.mle_weight_schedule = "none"
  train.learning_rate = 5e-4  # Peak learning rate.
  train.warmup_steps = 10_000  # Linear warmup steps (multiplies the linear decay to 0).
  train.weight_decay = 0.01  # AdamW decoupled weight decay (not on LayerNorm or biases).
  train.adam_b1 = 0.9  # Adam beta1.
  train.adam_b2 = 0.999  # Adam beta2.
  train.adam_eps = 1e-6  # Adam epsilon.
  # Adam's bias correction of its moments. False is the original ELECTRA's AdamW (no
  # correction: the first updates are up to (1 - b1) / sqrt(1 - b2) = 3.2x larger, tempered by
  # the warmup); True is optax's / the Adam paper's.
  train.adam_bias_correction = False
  train.max_grad_norm = 1.0  # Clip gradients to this global norm; 0 disables clipping.
  # A step whose loss or gradients are not finite is never applied (nor checkpointed). "stop":
  # end the run with an error naming the step and the newest checkpoint; "skip": go on without
  # that step (counted as train/nonfinite_steps).
  train.nonfinite_policy = "stop"
  train.log_every_steps = 100  # Steps between metric writes and progress lines.
  train.eval_every_steps = 10_000  # Steps between evaluations on held-out data; 0: never.
  train.eval_batches = 20  # Batches per evaluation.
  # Also evaluate before the first step (a run from init_checkpoint always does, unless
  # eval_every_steps=0 turns evaluation off).
  train.eval_at_start = False
  train.checkpoint_every_steps = 5_000  # Steps between checkpoints (one is also saved at the end).
  train.keep_checkpoints = 3  # Newest checkpoints kept in WORKDIR/checkpoints.
  # Batches built and put on the devices ahead of the step, in a background thread; 0: inline.
  train.prefetch_batches = 2
  # Persistent XLA compilation cache (a restart or a second run of the same shapes skips
  # compiling): "" = JAX's own setting (JAX_COMPILATION_CACHE_DIR) if any, else
  # WORKDIR/compilation_cache; a path (local or gs://); or "off".
  train.compilation_cache_dir = ""
  # A train step compiled ahead of time for this config and slice (python -m
  # electra_jax.benchmark --topology=... --save_compiled=FILE): loaded instead of compiling;
  # refused in one line if made for another config, device set or jax/libtpu version. "": compile.
  train.compiled_step = ""
  # Peak dense TFLOP/s of one device, for MFU on the progress line; 0: looked up from the
  # device kind (electra_jax/training/hardware.py; unknown devices show no MFU).
  train.peak_tflops = 0.0
  # Per parameter group optimizer settings. The objective names its groups (ELECTRA:
  # embeddings, generator, discriminator); learning_rate_scale multiplies the scheduled
  # learning rate, weight_decay < 0 uses train.weight_decay, trainable=False freezes the group.
  # Settings for a group the objective does not have are an error (defaults are ignored).
  train.param_groups = ml_collections.ConfigDict()
  # The MLM objectives' fine-tuned network is the group "encoder".
  for group in ("embeddings", "generator", "discriminator", "encoder"):
    train.param_groups[group] = ml_collections.ConfigDict(
        {"learning_rate_scale": 1.0, "weight_decay": -1.0, "trainable": True})

  mesh = config.mesh = ml_collections.ConfigDict()
  # Degrees of the three mesh axes within a slice (ICI); exactly one may be -1 (the rest of the
  # devices). data: batch split, parameters replicated. fsdp: batch split AND parameters,
  # gradients and optimizer state split (ZeRO-3; gathered per layer). tensor: attention heads
  # and the FFN width split (Megatron-style).
  mesh.data = -1  # Data-parallel degree; -1: all devices not used by fsdp and tensor.
  mesh.fsdp = 1  # Fully-sharded data-parallel degree.
  mesh.tensor = 1  # Tensor-parallel degree (must divide every encoder's attention heads).
  mesh.dcn_data = 1  # Data-parallel degree across slices (multi-slice TPU, DCN).
  mesh.dcn_fsdp = 1  # FSDP degree across slices.
  mesh.dcn_tensor = 1  # Tensor-parallel degree across slices (rarely useful).
  # Logical axis -> mesh axis (None: replicated). A mesh axis is used at most once per array
  # (the first matching rule wins), so [batch, length, hidden] activations split the batch over
  # data x fsdp while [hidden, mlp] kernels split over fsdp x tensor. With fsdp = tensor = 1
  # this is plain data parallelism.
  mesh.logical_axis_rules = [
      ("batch", ("data", "fsdp")),
      ("length", None),
      ("vocab", None),  # 30522 is not a multiple of common degrees: keep the table whole.
      ("embed", "fsdp"),
      ("hidden", "fsdp"),
      ("heads", "tensor"),
      ("kv", None),
      ("mlp", "tensor"),
      ("layers", None),  # The stacked-layer axis of scanned parameters.
  ]
  return config
