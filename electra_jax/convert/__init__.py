r"""Converts ELECTRA weights between Hugging Face `transformers` and electra-jax checkpoints.

  python -m electra_jax.convert from-hf --hf_dir=DISC_OR_FINETUNED_DIR [--generator_dir=GEN_DIR] \
      [--vocab_file=vocab.txt] [--generator_embeddings=auto|discriminator|untied] \
      --output=CKPT_DIR [--overwrite]
  python -m electra_jax.convert from-tf --checkpoint=TF_DIR/model.ckpt[-STEP] \
      [--vocab_file=TF_DIR/vocab.txt] [--num_heads=H] [--generator_num_heads=HG] \
      --output=CKPT_DIR [--overwrite]
  python -m electra_jax.convert to-hf --checkpoint=WORKDIR_OR_CKPT_OR_FINETUNED --output=DIR \
      [--overwrite]
  python -m electra_jax.convert to-sentence-transformers --checkpoint=WORKDIR_OR_CKPT_OR_EMBED \
      --output=DIR [--pooling=mean|cls] [--max_seq_length=N] [--overwrite]
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

Fine-tuned models go both ways too. `to-hf` of a fine-tuned sequence classifier (the "hf" head,
transformers' ElectraClassificationHead; a classification, regression or multilabel problem) or
token tagger (its <task>/seed_<s>/model/, or the fine-tuning workdir of one task: its median
seed's model) writes DIR/sequence_classification/ (ElectraForSequenceClassification) or
DIR/token_classification/ (ElectraForTokenClassification), with id2label / label2id and a
classifier's problem_type in config.json and a regression's target scaling folded into its
output layer, so transformers gives the label-scale output; SQuAD models with independent
start/end heads give DIR/question_answering/ (ElectraForQuestionAnswering). A classifier with
the original ELECTRA head has no transformers class and is refused (fine-tune with
--config.head=hf). `from-hf` of an ElectraForSequenceClassification or
ElectraForTokenClassification directory writes a fine-tuned checkpoint (`embeddings`,
`discriminator`, `task_head`, and the labels, problem and max_seq_length in its meta) that
fine-tuning continues from or predicts with (see `hf_heads.finetuned_from_hf_config`).

Models with the modern block (`model.architecture="modern"`) go out and come in as
transformers' ModernBERT classes (`hf_modernbert`, `hf_modernbert_models`): the discriminator
as ModernBertModel with its replaced-token-detection head in rtd_head.safetensors beside it, the
generator or an MLM objective's encoder as ModernBertForMaskedLM, fine-tuned models as
ModernBertFor{Sequence,Token}Classification / ModernBertForQuestionAnswering. `from-hf` reads
those, and a released ModernBertForMaskedLM (its encoder starts the discriminator), with the
folder's tokenizer.json.

`to-sentence-transformers` writes a checkpoint's encoder as a sentence-transformers model
folder (`sentence_transformers`): the encoder as `ElectraModel` or `ModernBertModel` at its
root with the tokenizer, then Pooling (mean or CLS: an `embed` model's own, `--pooling` for a
pretrained encoder) and Normalize modules, so that `SentenceTransformer(DIR).encode` gives the
embeddings `finetune.embed.model.load_embedder` gives. `from-hf` reads such a folder back (any
sentence-transformers folder of a Transformer, a mean or CLS Pooling and an optional
Normalize) as an embedding model: its pooling, normalisation and max_seq_length in the meta's
`finetuned`, as an `embed` run records them.

`extend-vocab` appends new words to a checkpoint's vocabulary (every old id keeps its meaning),
each row of the grown embeddings and output biases the mean of the rows of the pieces the word
used to be split into, and writes the grown checkpoint (see `vocab_extension`).

Layout: in memory, `hf_configs` maps the configs (and names the models and their transformers
classes), `hf_encoder` the encoders' parameters and pretraining heads, `hf_heads` the
fine-tuned task heads; `sentence_transformers` a sentence-transformers folder's modules and
base model; `files` reads and writes the directories; `tf_checkpoint` reads the
original TensorFlow checkpoints; `hf_tokenizer` writes a sentencepiece model as tokenizer.json;
`vocab_extension` grows a vocabulary; `__main__` is the command line.

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
`classifier_params_to_hf`, `classifier_params_from_hf`, and on directories: `from_hf`, `to_hf`,
`to_sentence_transformers`.
torch is needed only to read pytorch_model.bin.
"""

from electra_jax.convert.files import (  # pylint: disable=unused-import
    FromHfResult, ToHfResult, ToSentenceTransformersResult, convert_from_hf, convert_to_hf,
    convert_to_sentence_transformers, from_hf, read_hf_model, to_hf, to_sentence_transformers)
from electra_jax.convert.hf_configs import (  # pylint: disable=unused-import
    ARCHITECTURES, DISCRIMINATOR, GENERATOR, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION,
    hf_config_to_model_config, model_config_to_hf_configs)
from electra_jax.convert.hf_encoder import (  # pylint: disable=unused-import
    GENERATOR_EMBEDDINGS, LM_HEAD_WEIGHT, abstract_params, count_params, hf_name, params_from_hf,
    params_to_hf)
from electra_jax.convert.hf_heads import (  # pylint: disable=unused-import
    classifier_params_from_hf, classifier_params_to_hf, finetuned_from_hf_config)
from electra_jax.convert.tf_checkpoint import (  # pylint: disable=unused-import
    convert_from_tf, from_tf)
