"""Token classification (NER, chunking, POS) on CoNLL-style files.

Modules, lowest first:

  conll.py    reading CoNLL files (one token a line, the tag in the last column, a blank line
              between sentences, -DOCSTART- skipped) into `Sentence`s; writing predictions
  schemes.py  the label schemes BIO (IOB2), BIOES (IOBES), IO and NONE (tags without entity
              structure, e.g. POS); checking tags against a scheme, the entities of a tag
              sequence exactly as conlleval counts them, the label set of a training file
  metrics.py  entity-level precision, recall and F1 (overall and per entity type) and token
              accuracy, with conlleval's semantics
  windows.py  words to subword pieces: the label of a word on its first piece, sentences
              longer than a window split into windows with a stride, each word predicted once
              from the window where it has the most context; and back to one prediction per word
  default_config.py  every field of configs/tag.py, commented
  task.py     `python -m electra_jax.finetune --config=configs/tag.py`: `TagTask`, fine-tuning on
              the shared core (`finetune.seed`, `finetune.driver`) with `heads.TokenClassifier`, the
              loss on each word's first piece, dev scoring, CoNLL prediction files, saved
              models, and prediction with a fine-tuned model (train_file="")

The modules above default_config.py are pure Python and NumPy: no JAX, no model.
"""
