r"""Converts ELECTRA weights between Hugging Face `transformers` and electra-jax checkpoints.

  python -m electra_jax.convert from-hf --hf_dir=DISC_DIR [--generator_dir=GEN_DIR] \
      [--vocab_file=vocab.txt] [--generator_embeddings=auto|discriminator|untied] \
      --output=CKPT_DIR [--overwrite]
  python -m electra_jax.convert from-tf --checkpoint=TF_DIR/model.ckpt[-STEP] \
      [--vocab_file=TF_DIR/vocab.txt] [--num_heads=H] [--generator_num_heads=HG] \
      --output=CKPT_DIR [--overwrite]
  python -m electra_jax.convert to-hf --checkpoint=WORKDIR_OR_CKPT --output=DIR [--overwrite]
  python -m electra_jax.convert extend-vocab --checkpoint=WORKDIR_OR_CKPT \
      (--tokens=FILE | --from_corpus=GLOB --num_tokens=N) --output=CKPT_DIR [--overwrite]

`from-hf` reads a Hugging Face `ElectraForPreTraining` directory (config.json and
model.safetensors or pytorch_model.bin, e.g. a local copy of google/electra-base-discriminator)
and optionally the matching `ElectraForMaskedLM` generator, and writes an electra-jax checkpoint
(CKPT_DIR/checkpoints/0/ and CKPT_DIR/tokenizer/vocab.txt) that fine-tuning takes as its initial
checkpoint and `to-hf` reads back. `from-tf` writes the same from a checkpoint of the original
TensorFlow ELECTRA (google-research/electra, e.g. the released electra_small/: model.ckpt-* and
vocab.txt; see `tf_checkpoint`). `to-hf` writes DIR/discriminator/ (ElectraForPreTraining) and,
when the checkpoint has one, DIR/generator/ (ElectraForMaskedLM), each with config.json,
model.safetensors and the tokenizer files, loadable with `from_pretrained`. Each prints one
summary line.

`extend-vocab` appends new words to a checkpoint's vocabulary (every old id keeps its meaning),
each row of the grown embeddings and output biases the mean of the rows of the pieces the word
used to be split into, and writes the grown checkpoint (see `vocab_extension`).

Layout: `hf_mapping` maps names, shapes and configs in memory; `files` reads and writes the
directories; `vocab_extension` grows a vocabulary; `__main__` is the command line.

ELECTRA's generator and discriminator share one embedding module, while each Hugging Face model
file holds its own copy. `from-hf` maps the generator onto the shared embeddings when its copy
equals the discriminator's (within 1e-6, as in checkpoints trained together); otherwise it
stops and says which `--generator_embeddings` choice fits: `discriminator` (the generator reads
the discriminator's embeddings and its own are dropped, which changes its predictions) or
`untied` (the generator keeps its own embeddings, `model.untied_generator_embeddings=True`;
possible only when its embedding width equals its hidden width, as electra-jax builds untied
generators). Sizes that electra-jax derives for the generator (heads = hidden // 64,
FFN = 4 x hidden) must match the Hugging Face generator's, or the conversion stops.

The Python functions work on in-memory state dicts (torch tensors or numpy arrays) as well:
`hf_config_to_model_config`, `model_config_to_hf_configs`, `params_from_hf`, `params_to_hf`,
and on directories: `from_hf`, `to_hf`. torch is needed only to read pytorch_model.bin.
"""

from electra_jax.convert.files import (  # pylint: disable=unused-import
    FromHfResult, ToHfResult, convert_from_hf, convert_to_hf, from_hf, read_hf_model, to_hf)
from electra_jax.convert.hf_mapping import (  # pylint: disable=unused-import
    ARCHITECTURES, DISCRIMINATOR, GENERATOR, GENERATOR_EMBEDDINGS, LM_HEAD_WEIGHT,
    abstract_params, count_params, hf_config_to_model_config, hf_name,
    model_config_to_hf_configs, params_from_hf, params_to_hf)
from electra_jax.convert.tf_checkpoint import (  # pylint: disable=unused-import
    convert_from_tf, from_tf)
