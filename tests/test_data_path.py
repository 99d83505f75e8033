"""The data path gives what it gave before it was put behind `data.sources`: the same shard
files (local build) and the same batches, held-out sets, token counts, stream states and
provenance for every source kind and mixture, on the fixtures of tests/data_path_recording.py,
compared with tests/data/data_path_golden.json (recorded on commit 314cfb2)."""

import json
import os

import pytest

from tests import data_path_recording

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "data_path_golden.json")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
  return data_path_recording.record(str(tmp_path_factory.mktemp("data_path")))


def _golden():
  with open(GOLDEN, encoding="utf-8") as f:
    return json.load(f)


@pytest.mark.parametrize("case", sorted(_golden()))
def test_the_same_outputs_as_recorded(recorded, case):
  want = _golden()[case]
  got = recorded[case]
  assert sorted(got) == sorted(want)
  different = {key: (got[key], want[key]) for key in want if got[key] != want[key]}
  assert not different, f"{case}: changed since the recording: {different}"
