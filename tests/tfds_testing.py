"""A tiny tfds text dataset, defined in code and prepared into a temporary data_dir by tests."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

NAME = "electra_tfds_test_corpus"

TRAIN_TEXTS = (
    [f"para {i} one\n\n  para {i} two  \n" for i in range(9)]
    + [
        "",  # empty: skipped
        " \n\t\n  ",  # only whitespace: skipped
        b"caf\xe9 latin-1\nstill utf-8 here",  # invalid UTF-8
        "windows\r\nline\u2028separator",  # other line breaks
    ])
VALIDATION_TEXTS = ["held out one\nheld out two", "held out three"]


class ElectraTfdsTestCorpus(tfds.core.GeneratorBasedBuilder):
  """A small text dataset: 13 train records, 2 validation records."""

  VERSION = tfds.core.Version("1.0.0")
  # No source file to look for a checksums file next to. tfds 4.9.10 finds this file with
  # `importlib_resources`, which it does not install on Python >= 3.9
  # (tensorflow/datasets#11212); None is what tfds uses for a class defined in a notebook.
  code_path = None

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            "body": tfds.features.Text(),
            "meta": {"title": tfds.features.Text()},
            "label": tfds.features.ClassLabel(num_classes=3),
        }))

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {"train": self._generate_examples(TRAIN_TEXTS),
            "validation": self._generate_examples(VALIDATION_TEXTS)}

  def _generate_examples(self, texts):
    for i, text in enumerate(texts):
      yield i, {"body": text, "meta": {"title": f"title {i}"}, "label": i % 3}


def prepare(data_dir: str) -> str:
  """Prepares the dataset into `data_dir` (returns it)."""
  tfds.disable_progress_bar()
  ElectraTfdsTestCorpus(data_dir=data_dir).download_and_prepare()
  return data_dir
