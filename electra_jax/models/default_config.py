"""The `model` part of every pretraining config: the encoders' architecture, with ELECTRA-Small's
values from the paper and original code.

`electra_jax.pretrain.default_config` takes it as its `model` field (so every field here is
`model.<name>` there, e.g. `--config.model.hidden_size=768`); loading a checkpoint
(`electra_jax.training.pretrained`) and converting a Hugging Face config
(`electra_jax.convert.hf_configs`) start from it, so that a field a checkpoint predates keeps
its default. `electra_jax.models.electra.encoder_configs` turns it into the generator's and
discriminator's `EncoderConfig`s. Each field's comment is its documentation (`--show_config`).
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  """ELECTRA-Small's architecture (a 14M-parameter discriminator), as trained in the paper."""
  config = ml_collections.ConfigDict()
  config.vocab_size = 30522  # Token ids; must equal the tokenizer's vocabulary size.
  config.embedding_size = 128  # E: embedding width (projected to hidden_size when different).
  config.hidden_size = 256  # H: discriminator width.
  config.num_layers = 12  # Discriminator Transformer layers.
  config.num_heads = 4  # Discriminator attention heads (must divide hidden_size).
  config.intermediate_size = 1024  # Discriminator feed-forward width.
  config.max_position_embeddings = 512  # Longest sequence the position embeddings cover.
  config.type_vocab_size = 2  # Segment ids (A and B).
  config.hidden_dropout_prob = 0.1  # Dropout on embeddings and residual branches.
  config.attention_dropout_prob = 0.1  # Dropout on attention probabilities.
  config.initializer_range = 0.02  # Std of the truncated-normal initialiser.
  # Kernel initialiser of the layers the original builds with tf.layers.dense's default
  # (Glorot uniform): embeddings_project and discriminator_predictions/dense_prediction.
  # "truncated_normal" gives them initializer_range like every other layer (Hugging Face).
  config.plain_dense_init = "glorot_uniform"
  config.layer_norm_eps = 1e-12  # LayerNorm epsilon.
  config.generator_hidden_size = 0.25  # Generator width as a fraction of hidden_size.
  config.generator_layers = 1.0  # Generator depth as a fraction of num_layers.
  # What the generator and discriminator share (the paper's section 3.2): "embeddings" (one
  # embedding table, tied to the generator's output layer), "none" (the generator has its own
  # embeddings), "all" (one Transformer for both; needs generator_hidden_size = generator_layers
  # = 1), "gdes" (DeBERTa-v3: the discriminator reads stop_gradient(embeddings) + its own
  # zero-initialised delta of the word vectors). The MLM objectives take embeddings / none.
  config.weight_sharing = "embeddings"
  config.untied_generator_embeddings = False  # Older name: True means weight_sharing="none".
  config.dtype = "float32"  # Compute dtype: float32 or bfloat16 (parameters stay float32).
  # Rematerialisation of each Transformer layer in the backward pass: "none" keeps every
  # activation; "full" recomputes the layer (least memory, ~1.3x compute); "dots_saveable"
  # keeps matrix-product outputs and recomputes the cheap element-wise work in between.
  config.remat = "none"
  # Run the Transformer layers as one scan over stacked parameters (compiled once, not L
  # times; the same numbers). Checkpoints keep the layout they were written with: a resumed run
  # takes its checkpoint's, and fine-tuning, conversion and scoring read either.
  config.scan_layers = True
  # Attention implementation (electra_jax/models/attention.py): "xla" (plain XLA ops, with
  # attention dropout), "cudnn" (fused, GPU, bfloat16), "splash" (Pallas kernel, TPU, length a
  # multiple of 128) or "auto" (the fused kernel of the platform when attention_dropout_prob is
  # 0, else "xla"). The fused kernels have no attention dropout: with them it must be 0.
  config.attention = "auto"
  # The layer block: "electra" (BERT's: learned positions up to max_position_embeddings and
  # segment embeddings, post-LayerNorm, GELU feed-forward with biases, full attention) or
  # "modern" (ModernBERT's: rotary positions, pre-LayerNorm with a norm after the embeddings
  # and after the last layer, a GeGLU feed-forward of intermediate_size, no segment embeddings,
  # local attention between global layers; the fields below). docs/modern.md.
  config.architecture = "electra"
  # Modern only: a local layer's window in tokens (each query sees local_attention // 2 keys on
  # either side; even). ModernBERT: 128.
  config.local_attention = 128
  # Modern only: layer i attends globally when i % n == 0, locally otherwise (1: all global).
  config.global_attn_every_n_layers = 3
  config.global_rope_theta = 160_000.0  # Modern only: rotary base of the global layers.
  config.local_rope_theta = 10_000.0  # Modern only: rotary base of the local layers.
  config.attention_bias = False  # Modern only: biases of the attention projections.
  config.mlp_bias = False  # Modern only: biases of the feed-forward layers.
  config.norm_bias = False  # Modern only: LayerNorm offsets (ModernBERT has scales only).
  # Modern only: the bias of the heads' dense layer (the MLM head, the fine-tuning heads), as
  # ModernBERT's classifier_bias.
  config.classifier_bias = False
  return config
