"""`python -m electra_jax.data.build --runner=beam`: the same build as an Apache Beam pipeline
(`pip install -e '.[beam]'`), for corpora that outgrow one machine's processes.

Every shard is one element of the pipeline and runs the local build's own job
(`build.build_shard`: its input units, its seeds, its files), so for the same inputs, tokenizer
and seed the shards and the manifest are the local build's, byte for byte. Each job also
writes what the manifest needs (its shard infos, text statistics and token counts) under
OUTPUT/.beam-results/; when the pipeline has finished, the launching process reads them,
writes the unigram counts and, last, manifest.json (as the local build does), and deletes
.beam-results/.

The runner and its options are Beam's own, given after `--`: by default Beam's DirectRunner in
`--processes` worker processes (`--direct_running_mode=multi_processing`); on Dataflow:

  python -m electra_jax.data.build --runner=beam --input='gs://bucket/web/*.jsonl.zst' \\
      --tokenizer_model=gs://bucket/spm.model --output=gs://bucket/web_shards \\
      --num_shards=1024 -- --runner=DataflowRunner --project=PROJECT --region=REGION \\
      --temp_location=gs://bucket/tmp --setup_file=./setup.py

(the workers install this checkout through `--setup_file`; Flink and Spark take Beam's
`--runner=FlinkRunner` / `SparkRunner` options the same way).
"""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import numpy as np

from electra_jax import fileio
from electra_jax.data import shards as shards_lib
from electra_jax.data import text_files
from electra_jax.errors import ElectraError

RESULTS_DIR = ".beam-results"


def _result_path(output: str, shard: int, suffix: str) -> str:
  return fileio.join(output, RESULTS_DIR, f"shard-{shard:05d}.{suffix}")


def run_shard(shard: int, spec, job) -> int:
  """One shard's job on a Beam worker: `job(spec, shard)` (the local build's `build_shard`),
  its result written under OUTPUT/.beam-results/ (the counts as .npy, the rest as JSON)."""
  result = job(spec, shard)
  buffer = io.BytesIO()
  np.save(buffer, result["counts"])
  fileio.write_atomic(_result_path(spec.output, shard, "npy"), buffer.getvalue())
  record = {"shard": shard, "infos": {k: dataclasses.asdict(v)
                                      for k, v in result["infos"].items()},
            "stats": dataclasses.asdict(result["stats"])}
  fileio.write_atomic(_result_path(spec.output, shard, "json"), json.dumps(record))
  return shard


def _read_result(output: str, shard: int) -> dict[str, Any]:
  path = _result_path(output, shard, "json")
  if not fileio.exists(path):
    raise ElectraError(f"the Beam pipeline finished without shard {shard}'s result ({path}); "
                       "rerun the build with --overwrite")
  record = json.loads(fileio.read_bytes(path))
  counts = np.load(io.BytesIO(fileio.read_bytes(_result_path(output, shard, "npy"))))
  return {"shard": shard,
          "infos": {k: shards_lib.ShardInfo(**v) for k, v in record["infos"].items()},
          "stats": text_files.TextStats(**record["stats"]), "counts": counts}


def default_options(processes: int) -> list[str]:
  """Beam options when none are given: the DirectRunner in `processes` worker processes."""
  import os  # pylint: disable=import-outside-toplevel
  workers = processes or os.cpu_count() or 1
  return ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
          f"--direct_num_workers={workers}"]


def build_shards(spec, beam_args: list[str], processes: int, progress: bool, job
                 ) -> list[dict[str, Any]]:
  """Runs every shard's `job(spec, shard)` (`build.build_shard`) as a Beam pipeline; returns
  the jobs' results by shard index.

  Raises:
    ElectraError: Beam is not installed, or the pipeline failed (the directory is left without
      a manifest, so training refuses it).
  """
  try:
    import apache_beam as beam  # pylint: disable=import-outside-toplevel
    from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("--runner=beam needs Apache Beam: pip install -e '.[beam]' (or "
                       "apache-beam), or build with --runner=local") from e
  args = list(beam_args) or default_options(processes)
  fileio.makedirs(fileio.join(spec.output, RESULTS_DIR))
  try:
    with beam.Pipeline(options=PipelineOptions(args)) as pipeline:
      _ = (pipeline
           | "shards" >> beam.Create(list(range(spec.num_shards)))
           | "spread" >> beam.Reshuffle()
           | "build" >> beam.Map(run_shard, spec, job))
  except ElectraError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"the Beam pipeline failed ({type(e).__name__}: {str(e)[:500]}); "
                       f"{spec.output} has no {shards_lib.MANIFEST}, so training refuses it; fix "
                       "the cause and rerun with --overwrite") from e
  results = [_read_result(spec.output, shard) for shard in range(spec.num_shards)]
  if progress:
    for result in results:
      info = result["infos"]["train"]
      print(f"[{result['shard'] + 1}/{spec.num_shards}] {info.file}: {info.examples:,} "
            f"{'packed rows' if spec.recipe.packing else 'examples'}, {info.tokens:,} tokens, "
            f"{info.documents:,} documents (Beam)", flush=True)
  fileio.rmtree(fileio.join(spec.output, RESULTS_DIR))
  return results
