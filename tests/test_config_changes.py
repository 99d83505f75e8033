"""`electra_jax.training.config_changes`: what differs between a recorded and a current config."""

from electra_jax.training import config_changes


def _config(tokenizer_model="", batch_size=128, axes=("data",)):
  return {"data": {"tokenizer_model": tokenizer_model},
          "train": {"batch_size": batch_size, "log_every_steps": 100},
          "mesh": {"axes": axes}}


def test_changes_are_named_and_sorted_into_allowed_and_refused():
  recorded = _config(batch_size=128, axes=["data"])  # JSON made the tuple a list.
  now = _config(batch_size=256, axes=("data",))
  now["train"]["log_every_steps"] = 10
  now["train"]["new_field"] = 1  # Added by a newer electra-jax: one-sided, allowed.
  changes = config_changes.diff(recorded, now)
  assert [c.field for c in changes] == ["train.batch_size", "train.log_every_steps",
                                        "train.new_field"]
  allowed, refused = config_changes.split(changes, config_changes.RESUME_SAFE)
  assert [c.field for c in allowed] == ["train.log_every_steps", "train.new_field"]
  assert [str(c) for c in refused] == ["train.batch_size: 128 -> 256"]


def test_a_tokenizer_at_another_path_with_the_same_bytes_is_no_change(tmp_path):
  original, copy, other = tmp_path / "a.model", tmp_path / "copy.model", tmp_path / "b.model"
  original.write_bytes(b"\x00sentencepiece model bytes")
  copy.write_bytes(original.read_bytes())
  other.write_bytes(b"\x00another model")
  assert config_changes.diff(_config(str(original)), _config(str(copy))) == []
  (change,) = config_changes.diff(_config(str(original)), _config(str(other)))
  assert change.field == "data.tokenizer_model"
  # A recorded file that is gone cannot be compared: still a change.
  (change,) = config_changes.diff(_config(str(tmp_path / "gone.model")), _config(str(copy)))
  assert change.field == "data.tokenizer_model"
  # Only file fields are compared by content.
  assert not config_changes.same_content(str(tmp_path), str(tmp_path / "copy.model"))
