"""The session's shards (tests/conftest.py: `corpus_shards`): how they are built, so that a test
can build them again with one option changed and compare."""

# 4 shards of 32-token examples, 10% of the documents held out as the eval split.
OPTIONS = {"num_shards": 4, "max_seq_length": 32, "eval_fraction": 0.1}


def build(files: str, model: str, output: str, **changes) -> str:
  """Builds the shards of FILES (comma-separated text files) with the sentencepiece MODEL into
  OUTPUT, with OPTIONS updated by CHANGES; returns OUTPUT."""
  from electra_jax.data import build as build_lib  # pylint: disable=import-outside-toplevel
  build_lib.build(**{**OPTIONS, **changes}, output=output, tokenizer_model=model,
                  input_patterns=files, processes=1, progress=False)
  return output
