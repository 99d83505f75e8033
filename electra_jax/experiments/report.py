"""An experiment's results from its directory: results.json, results.md and the plots.

Everything is read back from the files the runs wrote (variant.json, timing.json, each
fine-tuning point's results.json, the raw evaluations' metrics.json, the pretraining
metrics.jsonl), so the report of an interrupted or partly finished experiment shows what
exists, and rewriting it is idempotent.

downstream "glue": scores are GLUE dev metrics x100 (the paper's: MCC for CoLA, Spearman for
STS-B, accuracy otherwise; MNLI matched), each the median over the fine-tuning seeds; a
variant's GLUE score is the mean of its tasks' medians, given only when every configured task
has one.

downstream "embed": each checkpoint's sentence-embedding metrics x100 (`EMBED_METRICS`: STS
Spearman and Pearson of the cosine, retrieval nDCG@10, MRR@10, Recall@100, MAP@100, as
`electra_jax.embed evaluate` computes them), "raw" for the pretrained encoder as it is (one
deterministic evaluation) and "tuned" after the contrastive stage (the median over its seeds,
and each seed's); embed_vs_flops.png draws them against pretraining FLOPs.

downstream "retrieval": each checkpoint's retrieval metrics x100 for each stage of
`retrieval.STAGES` run ("single", "multi", "rerank"), "raw" for the pretrained encoder as a
single- and multi-vector model (one deterministic evaluation each) and "tuned" after the stage
(the median over its seeds, and each seed's), beside BM25 alone (WORKDIR/bm25/, the same for
every variant); retrieval_vs_flops.png draws nDCG@10 and MRR@10 against pretraining FLOPs.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import jax
import ml_collections

from electra_jax import fileio
from electra_jax.experiments import retrieval
from electra_jax.experiments import spec
from electra_jax.finetune import glue
from electra_jax.finetune.embed import evaluation as embed_evaluation
from electra_jax.finetune.embed import task as embed_finetune
from electra_jax.finetune.glue import task as glue_finetune
from electra_jax.training import metrics as metrics_lib

# Panels of pretraining_curves.png: (metrics.jsonl key, title). Each variant draws the ones it
# logs; the masked-LM accuracy is the generator's for the ELECTRA family, the model's own for
# the MLM family.
CURVES = (("train/loss", "training loss (the objective's own)"),
          ("train/masked_lm_accuracy", "masked-LM accuracy (ELECTRA: the generator's)"),
          ("train/disc_loss", "discriminator loss"),
          ("eval/disc_auc", "held-out discriminator AUC"))


# downstream "embed": under variants/<name>/, EMBED_DIR/step_<s>/ holds POINT_RECORD_FILE (the
# config.embed it was started with), RAW_DIR/ (the raw encoder's run.trec and metrics.json) and
# TUNED_DIR/ (the contrastive stage's workdir).
EMBED_DIR, RAW_DIR, TUNED_DIR, POINT_RECORD_FILE = "embed", "raw", "tuned", "embed.json"
# The embedding metrics reported, in order.
EMBED_METRICS = embed_evaluation.STS_METRICS + embed_evaluation.RETRIEVAL_METRICS
# Those of results.md's main table and embed_vs_flops.png, raw and tuned (of those measured).
EMBED_TABLE = ("sts/spearman", "retrieval/ndcg@10", "retrieval/mrr@10")
# Short column names of the embedding metrics.
EMBED_LABELS = {"sts/spearman": "STS Spearman", "sts/pearson": "STS Pearson",
                "retrieval/ndcg@10": "nDCG@10", "retrieval/mrr@10": "MRR@10",
                "retrieval/recall@100": "Recall@100", "retrieval/map@100": "MAP@100"}


def variant_record(variant: spec.Variant) -> dict[str, Any]:
  """What variant.json holds: the resolved recipe and its budget."""
  return {"name": variant.name, "overrides": variant.overrides,
          "objective": variant.config.objective.name, "steps": variant.steps,
          "flops_per_step": variant.flops_per_step, "pretrain_flops": variant.pretrain_flops,
          "finetune_points": variant.points,
          "config": json.loads(variant.config.to_json_best_effort())}


def _read_json(path: str) -> Any:
  return json.loads(fileio.read_bytes(path).decode("utf-8")) if fileio.exists(path) else None


def _point(variant: spec.Variant, variant_dir: str, step: int, tasks: Sequence[str]
           ) -> dict[str, Any]:
  summary = _read_json(fileio.join(variant_dir, "glue", f"step_{step}", "results.json")) or {}
  scores = {}
  for name in tasks:
    if name not in summary:
      continue
    task = glue.get_task(name)
    seeds = [100 * glue_finetune.primary_score(task, m) for m in summary[name]["seeds"].values()]
    scores[name] = {"metric": task.primary_metric, "median": 100 * summary[name]["median_score"],
                    "seeds": seeds}
  point = {"step": step, "pretrain_flops": step * variant.flops_per_step, "tasks": scores}
  if scores and all(t in scores for t in tasks):
    point["glue"] = sum(scores[t]["median"] for t in tasks) / len(tasks)
  return point


def _last_eval(pretrain_dir: str) -> dict[str, float]:
  path = fileio.join(pretrain_dir, "metrics.jsonl")
  if not fileio.exists(path):
    return {}
  evals = [r for r in metrics_lib.read_metrics(path) if any(k.startswith("eval/") for k in r)]
  if not evals:
    return {}
  last = evals[-1]
  return {"step": last["step"], **{k[len("eval/"):]: v for k, v in last.items()
                                   if k.startswith("eval/")}}


def embed_metrics(config: ml_collections.ConfigDict) -> list[str]:
  """The embedding metrics an embed experiment measures (`EMBED_METRICS` of the STS file and
  the retrieval set it was given)."""
  return [m for m in EMBED_METRICS
          if (config.embed.sts_file if m.startswith("sts/") else config.embed.retrieval_dir)]


def _embed_point(variant: spec.Variant, variant_dir: str, step: int, metrics: Sequence[str],
                 num_seeds: int) -> dict[str, Any]:
  point_dir = fileio.join(variant_dir, EMBED_DIR, f"step_{step}")
  raw_dir = fileio.join(point_dir, RAW_DIR)
  raw = _read_json(fileio.join(raw_dir, embed_evaluation.METRICS_FILE)) or {}
  summary = (_read_json(fileio.join(point_dir, TUNED_DIR, "results.json")) or {}).get(
      embed_finetune.NAME, {})
  seeds = summary.get("seeds", {})
  point = {"step": step, "pretrain_flops": step * variant.flops_per_step,
           "raw": {m: 100 * raw[m] for m in metrics if m in raw}, "tuned": {}}
  for m in metrics:
    values = [100 * seeds[s][m] for s in sorted(seeds, key=int) if m in seeds[s]]
    if values:
      point["tuned"][m] = {"median": 100 * summary["median"][m], "seeds": values}
  point["complete"] = (len(point["raw"]) == len(metrics) and len(seeds) >= num_seeds
                       and len(point["tuned"]) == len(metrics))
  return point


def _collect_embed(config: ml_collections.ConfigDict, variants: Sequence[spec.Variant],
                   workdir: str, out: dict[str, Any]) -> dict[str, Any]:
  """`collect` for downstream "embed"."""
  metrics = embed_metrics(config)
  e = config.embed
  out["experiment"].update(
      downstream="embed", metrics=metrics, num_seeds=e.num_seeds,
      embed={"train_file": e.train_file, "sts_file": e.sts_file,
             "retrieval_dir": e.retrieval_dir, "pooling": e.pooling,
             "max_seq_length": e.max_seq_length, "loss": e.loss, "batch_size": e.batch_size,
             "num_epochs": e.num_epochs, "learning_rate": e.learning_rate})
  for v in variants:
    variant_dir = fileio.join(workdir, "variants", v.name)
    timing = _read_json(fileio.join(variant_dir, "timing.json")) or {}
    points = [_embed_point(v, variant_dir, step, metrics, e.num_seeds) for step in v.points]
    final = points[-1]
    out["variants"][v.name] = {
        "overrides": v.overrides, "objective": v.config.objective.name, "steps": v.steps,
        "flops_per_step": v.flops_per_step, "pretrain_flops": v.pretrain_flops,
        "pretrain_seconds": timing.get("pretrain_seconds"),
        "raw_eval_seconds": timing.get("raw_eval_seconds"),
        "embed_seconds": timing.get("embed_seconds"),
        "points": points, "raw": final["raw"], "tuned": final["tuned"],
        "pretrain_eval": _last_eval(fileio.join(variant_dir, "pretrain")),
        "complete": all(p["complete"] for p in points)}
  return out


def _retrieval_point(config: ml_collections.ConfigDict, variant: spec.Variant,
                     variant_dir: str, step: int) -> dict[str, Any]:
  point_dir = fileio.join(variant_dir, retrieval.DIR, f"step_{step}")
  raw_stages = retrieval.raw_stages(config)
  stages, complete = {}, True
  for stage in retrieval.stages_of(config):
    entry: dict[str, Any] = {"tuned": {}}
    if stage in raw_stages:
      raw = _read_json(fileio.join(point_dir, stage, retrieval.RAW_DIR,
                                   embed_evaluation.METRICS_FILE)) or {}
      entry["raw"] = {m: 100 * raw[m] for m in retrieval.METRICS if m in raw}
      complete = complete and len(entry["raw"]) == len(retrieval.METRICS)
    summary = (_read_json(retrieval.summary_file(point_dir, stage)) or {}).get(
        retrieval.summary_key(stage), {})
    seeds = summary.get("seeds", {})
    for m in retrieval.METRICS:
      values = [100 * seeds[s][m] for s in sorted(seeds, key=int) if m in seeds[s]]
      if values:
        entry["tuned"][m] = {"median": 100 * summary["median"][m], "seeds": values}
    complete = (complete and len(seeds) >= retrieval.num_seeds(config, stage)
                and len(entry["tuned"]) == len(retrieval.METRICS))
    stages[stage] = entry
  return {"step": step, "pretrain_flops": step * variant.flops_per_step, "stages": stages,
          "complete": complete}


def _collect_retrieval(config: ml_collections.ConfigDict, variants: Sequence[spec.Variant],
                       workdir: str, out: dict[str, Any]) -> dict[str, Any]:
  """`collect` for downstream "retrieval"."""
  e, r = config.embed, config.rerank
  stages = retrieval.stages_of(config)
  bm25 = _read_json(fileio.join(workdir, retrieval.BM25_DIR, embed_evaluation.METRICS_FILE))
  out["experiment"].update(
      downstream="retrieval", stages=stages, raw=retrieval.raw_stages(config),
      metrics=list(retrieval.METRICS),
      num_seeds={s: retrieval.num_seeds(config, s) for s in stages},
      bm25={m: 100 * bm25[m] for m in retrieval.METRICS if m in bm25} if bm25 else {},
      embed={"train_file": e.train_file, "retrieval_dir": e.retrieval_dir,
             "negative_fields": e.negative_fields, "pooling": e.pooling,
             "max_seq_length": e.max_seq_length, "query_length": e.query_length,
             "colbert_dim": e.colbert_dim, "loss": e.loss, "batch_size": e.batch_size,
             "num_epochs": e.num_epochs, "learning_rate": e.learning_rate},
      rerank={"loss": r.loss, "top_k": r.top_k, "max_seq_length": r.max_seq_length,
              "batch_size": r.batch_size, "num_epochs": r.num_epochs,
              "learning_rate": r.learning_rate})
  phases = ("raw_eval_seconds",) + tuple(f"{s}_seconds" for s in retrieval.STAGES)
  for v in variants:
    variant_dir = fileio.join(workdir, "variants", v.name)
    timing = _read_json(fileio.join(variant_dir, "timing.json")) or {}
    points = [_retrieval_point(config, v, variant_dir, step) for step in v.points]
    out["variants"][v.name] = {
        "overrides": v.overrides, "objective": v.config.objective.name, "steps": v.steps,
        "flops_per_step": v.flops_per_step, "pretrain_flops": v.pretrain_flops,
        "pretrain_seconds": timing.get("pretrain_seconds"),
        **{phase: timing.get(phase) for phase in phases},
        "points": points, "stages": points[-1]["stages"],
        "pretrain_eval": _last_eval(fileio.join(variant_dir, "pretrain")),
        "complete": all(p["complete"] for p in points)}
  return out


def collect(config: ml_collections.ConfigDict, variants: Sequence[spec.Variant], workdir: str
            ) -> dict[str, Any]:
  """The results.json content from what is on disk."""
  if config.downstream in ("embed", "retrieval"):
    out = {"experiment": {"budget": config.budget, "reference_variant": config.reference_variant,
                          "reference_steps": config.reference_steps,
                          "pretrain_config": config.pretrain_config,
                          "pretrain_overrides": config.pretrain_overrides,
                          "data_overrides": config.data_overrides,
                          "finetune_at": [p / v.steps for v in variants[:1] for p in v.points]},
           "variants": {}}
    if config.downstream == "retrieval":
      return _collect_retrieval(config, variants, workdir, out)
    return _collect_embed(config, variants, workdir, out)
  tasks = [t.name for t in glue_finetune.task_names(config.finetune)]
  out = {"experiment": {"budget": config.budget, "reference_variant": config.reference_variant,
                        "reference_steps": config.reference_steps,
                        "pretrain_config": config.pretrain_config,
                        "pretrain_overrides": config.pretrain_overrides,
                        "data_overrides": config.data_overrides,
                        "tasks": tasks, "num_seeds": config.finetune.num_seeds,
                        "finetune_at": [p / v.steps for v in variants[:1] for p in v.points]},
         "variants": {}}
  for v in variants:
    variant_dir = fileio.join(workdir, "variants", v.name)
    timing = _read_json(fileio.join(variant_dir, "timing.json")) or {}
    points = [_point(v, variant_dir, step, tasks) for step in v.points]
    final = points[-1]
    out["variants"][v.name] = {
        "overrides": v.overrides, "objective": v.config.objective.name, "steps": v.steps,
        "flops_per_step": v.flops_per_step, "pretrain_flops": v.pretrain_flops,
        "pretrain_seconds": timing.get("pretrain_seconds"),
        "finetune_seconds": timing.get("finetune_seconds"),
        "points": points, "tasks": final["tasks"], "glue": final.get("glue"),
        "pretrain_eval": _last_eval(fileio.join(variant_dir, "pretrain")),
        "complete": "glue" in final}
  return out


def _fmt(value: float | None, digits: int = 1) -> str:
  return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else (
      f"{value:.{digits}f}")


def _duration(seconds: float | None) -> str:
  if seconds is None:
    return "-"
  seconds = int(seconds)
  return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _embed_table(results: dict[str, Any]) -> str:
  """One row per variant: steps, FLOPs, raw and tuned STS Spearman, nDCG@10 and MRR@10 (of
  those measured), the times."""
  shown = [m for m in EMBED_TABLE if m in results["experiment"]["metrics"]]
  header = ["variant", "objective", "steps", "pretrain FLOPs"]
  for m in shown:
    header += [f"raw {EMBED_LABELS[m]}", f"tuned {EMBED_LABELS[m]}"]
  header += ["pretrain time", "embed time"]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name, v in results["variants"].items():
    cells = [name, v["objective"], str(v["steps"]), f"{v['pretrain_flops']:.3g}"]
    for m in shown:
      cells += [_fmt(v["raw"].get(m)),
                _fmt(v["tuned"][m]["median"]) if m in v["tuned"] else "-"]
    seconds = [v[k] for k in ("raw_eval_seconds", "embed_seconds") if v.get(k) is not None]
    cells += [_duration(v["pretrain_seconds"]), _duration(sum(seconds) if seconds else None)]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _retrieval_columns(results: dict[str, Any]) -> list[tuple[str, str, str]]:
  """(stage, "raw" or "tuned", column name) of the retrieval tables, in order."""
  e = results["experiment"]
  names = {"single": "single", "multi": "multi", "rerank": "BM25 + CE"}
  columns = []
  for stage in e["stages"]:
    if stage in e["raw"]:
      columns.append((stage, "raw", f"{names[stage]} raw"))
    if stage == "rerank":
      columns.append(("bm25", "", "BM25"))
    columns.append((stage, "tuned", names[stage]))
  return columns


def _retrieval_value(results: dict[str, Any], stages: dict[str, Any], stage: str, kind: str,
                     metric: str) -> float | None:
  if stage == "bm25":
    return results["experiment"]["bm25"].get(metric)
  entry = stages.get(stage, {})
  if kind == "raw":
    return entry.get("raw", {}).get(metric)
  return entry.get("tuned", {}).get(metric, {}).get("median")


def retrieval_table(results: dict[str, Any], metric: str = "retrieval/ndcg@10") -> str:
  """One row per variant: steps, FLOPs, `metric` (x100) of each stage, raw and tuned (the
  median seed's), BM25 alone beside the cross-encoder, the times."""
  columns = _retrieval_columns(results)
  header = (["variant", "objective", "steps", "pretrain FLOPs"] + [c[2] for c in columns]
            + ["pretrain time", "retrieval time"])
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name, v in results["variants"].items():
    cells = [name, v["objective"], str(v["steps"]), f"{v['pretrain_flops']:.3g}"]
    cells += [_fmt(_retrieval_value(results, v["stages"], stage, kind, metric))
              for stage, kind, _ in columns]
    seconds = [v[k] for k in ("raw_eval_seconds",
                              *(f"{s}_seconds" for s in retrieval.STAGES))
               if v.get(k) is not None]
    cells += [_duration(v["pretrain_seconds"]), _duration(sum(seconds) if seconds else None)]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def markdown_table(results: dict[str, Any]) -> str:
  """One row per variant: steps, FLOPs, each task's median, the GLUE average, the times
  (downstream "embed": `_embed_table`; "retrieval": `retrieval_table` of nDCG@10)."""
  if results["experiment"].get("downstream") == "embed":
    return _embed_table(results)
  if results["experiment"].get("downstream") == "retrieval":
    return retrieval_table(results)
  tasks = results["experiment"]["tasks"]
  header = (["variant", "objective", "steps", "pretrain FLOPs"] + tasks
            + ["GLUE", "pretrain time", "fine-tune time"])
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name, v in results["variants"].items():
    cells = [name, v["objective"], str(v["steps"]), f"{v['pretrain_flops']:.3g}"]
    cells += [_fmt(v["tasks"][t]["median"]) if t in v["tasks"] else "-" for t in tasks]
    cells += [_fmt(v["glue"]), _duration(v["pretrain_seconds"]),
              _duration(v["finetune_seconds"])]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _seed_table(results: dict[str, Any]) -> str:
  tasks = results["experiment"]["tasks"]
  lines = ["| variant | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
  for name, v in results["variants"].items():
    cells = [", ".join(_fmt(s) for s in v["tasks"][t]["seeds"]) if t in v["tasks"] else "-"
             for t in tasks]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _points_table(results: dict[str, Any]) -> str:
  lines = ["| variant | step | pretrain FLOPs | GLUE |", "|---|---|---|---|"]
  for name, v in results["variants"].items():
    for p in v["points"]:
      lines.append(f"| {name} | {p['step']} | {p['pretrain_flops']:.3g} | "
                   f"{_fmt(p.get('glue'))} |")
  return "\n".join(lines)


def _eval_table(results: dict[str, Any]) -> str:
  keys = ("masked_lm_accuracy", "disc_auc", "disc_accuracy", "all_original_accuracy",
          "all_tokens_accuracy", "loss")
  present = [k for k in keys if any(k in v["pretrain_eval"] for v in results["variants"].values())]
  lines = ["| variant | step | " + " | ".join(present) + " |",
           "|---|---|" + "---|" * len(present)]
  for name, v in results["variants"].items():
    e = v["pretrain_eval"]
    lines.append(f"| {name} | {e.get('step', '-')} | "
                 + " | ".join(_fmt(e.get(k), 4) for k in present) + " |")
  return "\n".join(lines)


def _embed_seed_table(results: dict[str, Any]) -> str:
  metrics = results["experiment"]["metrics"]
  lines = ["| variant | " + " | ".join(EMBED_LABELS[m] for m in metrics) + " |",
           "|---|" + "---|" * len(metrics)]
  for name, v in results["variants"].items():
    cells = [", ".join(_fmt(s) for s in v["tuned"][m]["seeds"]) if m in v["tuned"] else "-"
             for m in metrics]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _embed_all_table(results: dict[str, Any]) -> str:
  """Every measured metric, raw and tuned, at every point."""
  metrics = results["experiment"]["metrics"]
  lines = ["| variant | step | pretrain FLOPs | stage | " + " | ".join(
      EMBED_LABELS[m] for m in metrics) + " |", "|---|---|---|---|" + "---|" * len(metrics)]
  for name, v in results["variants"].items():
    for p in v["points"]:
      for stage in ("raw", "tuned"):
        values = [p[stage].get(m) if stage == "raw" else p[stage].get(m, {}).get("median")
                  for m in metrics]
        lines.append(f"| {name} | {p['step']} | {p['pretrain_flops']:.3g} | {stage} | "
                     + " | ".join(_fmt(x) for x in values) + " |")
  return "\n".join(lines)


def _embed_markdown(results: dict[str, Any], budget: str) -> list[str]:
  """results.md's parts for downstream "embed", up to the held-out pretraining metrics."""
  e = results["experiment"]
  m = e["embed"]
  sources = [f"STS `{m['sts_file']}`" if m["sts_file"] else "",
             f"retrieval `{m['retrieval_dir']}`" if m["retrieval_dir"] else ""]
  return [
      "# Experiment results", "",
      f"Pretraining: `{e['pretrain_config']}` with `{e['pretrain_overrides'] or '(no overrides)'}`"
      + (f" and `{e['data_overrides']}`" if e["data_overrides"] else "") + f"; {budget}."
      + f" Embeddings: {m['pooling']} pooling, L2-normalised, {m['max_seq_length']} tokens, "
      f"evaluated on {' and '.join(s for s in sources if s)}; raw: the pretrained encoder as "
      f"it is; tuned: after the contrastive stage ({m['loss']}, `{m['train_file']}`), the "
      f"median of {e['num_seeds']} seed(s). Metrics x100.", "",
      markdown_table(results), "",
      "Every metric, raw and tuned (the tuned median), at each checkpoint:", "",
      _embed_all_table(results), "",
      "Per-seed tuned scores:", "", _embed_seed_table(results), ""]


def _retrieval_markdown(results: dict[str, Any], budget: str) -> list[str]:
  """results.md's parts for downstream "retrieval", up to the held-out pretraining metrics."""
  e = results["experiment"]
  m, r = e["embed"], e["rerank"]
  metrics = e["metrics"]
  seeds = ", ".join(f"{s} {n}" for s, n in e["num_seeds"].items())
  every = ["| variant | step | pretrain FLOPs | stage | " + " | ".join(
      EMBED_LABELS[x] for x in metrics) + " |", "|---|---|---|---|" + "---|" * len(metrics)]
  every.append("| BM25 alone | - | - | bm25 | " + " | ".join(
      _fmt(e["bm25"].get(x)) for x in metrics) + " |")
  per_seed = ["| variant | stage | nDCG@10 | MRR@10 |", "|---|---|---|---|"]
  for name, v in results["variants"].items():
    for p in v["points"]:
      for stage, entry in p["stages"].items():
        for kind in ("raw", "tuned"):
          if kind == "raw" and "raw" not in entry:
            continue
          values = [_retrieval_value(results, p["stages"], stage, kind, x) for x in metrics]
          every.append(f"| {name} | {p['step']} | {p['pretrain_flops']:.3g} | {stage} {kind} | "
                       + " | ".join(_fmt(x) for x in values) + " |")
    for stage, entry in v["stages"].items():
      per_seed.append(f"| {name} | {stage} | " + " | ".join(
          ", ".join(_fmt(x) for x in entry["tuned"][k]["seeds"]) if k in entry["tuned"]
          else "-" for k in ("retrieval/ndcg@10", "retrieval/mrr@10")) + " |")
  return [
      "# Experiment results", "",
      f"Pretraining: `{e['pretrain_config']}` with `{e['pretrain_overrides'] or '(no overrides)'}`"
      + (f" and `{e['data_overrides']}`" if e["data_overrides"] else "") + f"; {budget}."
      + f" Retrieval on `{m['retrieval_dir']}`; every stage trains on `{m['train_file']}`"
      f" (negatives: `{m['negative_fields'] or 'in-batch only'}`). single: {m['pooling']} "
      f"pooling, {m['max_seq_length']} tokens; multi: ColBERT, {m['colbert_dim']} dimensions "
      f"a token, queries of {m['query_length']} positions (both {m['loss']}, batch "
      f"{m['batch_size']}); BM25 + CE: a cross-encoder ({r['loss']}, {r['max_seq_length']} "
      f"tokens a pair) reranking BM25's top {r['top_k']}; raw: the pretrained encoder as it "
      f"is; tuned values are the median of the seeds ({seeds}). Metrics x100.", "",
      "nDCG@10:", "", retrieval_table(results, "retrieval/ndcg@10"), "",
      "MRR@10:", "", retrieval_table(results, "retrieval/mrr@10"), "",
      "Every metric at each checkpoint (tuned: the median seed's):", "", "\n".join(every), "",
      "Per-seed tuned scores:", "", "\n".join(per_seed), ""]


def markdown(results: dict[str, Any]) -> str:
  """results.md: the budget, the main table, per-seed scores, held-out pretraining metrics."""
  e = results["experiment"]
  ref = results["variants"][e["reference_variant"]]
  budget = (f"every variant spends the pretraining FLOPs of {e['reference_steps']} steps of "
            f"{e['reference_variant']} ({ref['pretrain_flops']:.3g} FLOPs)"
            if e["budget"] == "flops" else
            f"every variant runs {e['reference_steps']} pretraining steps")
  embed = e.get("downstream") == "embed"
  ranked = e.get("downstream") == "retrieval"
  if embed:
    parts = _embed_markdown(results, budget)
  elif ranked:
    parts = _retrieval_markdown(results, budget)
  else:
    parts = [
        "# Experiment results", "",
        f"Pretraining: `{e['pretrain_config']}` with "
        f"`{e['pretrain_overrides'] or '(no overrides)'}`"
        + (f" and `{e['data_overrides']}`" if e["data_overrides"] else "") + f"; {budget}."
        + f" Fine-tuning: {', '.join(e['tasks'])}, the median of {e['num_seeds']} seed(s) "
        "per task (GLUE dev, x100; GLUE = the mean of the task medians).", "",
        markdown_table(results), "",
        "Per-seed scores:", "", _seed_table(results), ""]
  if not (embed or ranked) and any(len(v["points"]) > 1 for v in results["variants"].values()):
    parts += ["GLUE at each fine-tuned checkpoint:", "", _points_table(results), ""]
  parts += [
      "Held-out pretraining metrics at the last evaluation:", "", _eval_table(results), "",
      "Variants:", ""]
  for name, v in results["variants"].items():
    parts.append(f"- `{name}`: `{v['overrides'] or '(the pretraining config as it is)'}`; "
                 f"{v['steps']} steps x {v['flops_per_step']:.3g} FLOPs")
  figure = ("![Embeddings against pretraining FLOPs](embed_vs_flops.png)" if embed else
            "![Retrieval against pretraining FLOPs](retrieval_vs_flops.png)" if ranked else
            "![GLUE against pretraining FLOPs](glue_vs_flops.png)")
  parts += ["", figure, "",
            "![Pretraining curves](pretraining_curves.png)", ""]
  return "\n".join(parts)


def _plot_embed(plt, results: dict[str, Any], workdir: str) -> str:
  """embed_vs_flops.png: one panel per metric of `EMBED_TABLE` measured, each variant's raw
  (dashed, open squares) and tuned (solid, dots) value against pretraining FLOPs."""
  shown = [m for m in EMBED_TABLE if m in results["experiment"]["metrics"]]
  fig, axes = plt.subplots(1, len(shown), figsize=(5.2 * len(shown), 4.4), squeeze=False)
  for metric, ax in zip(shown, axes[0]):
    for index, (name, v) in enumerate(results["variants"].items()):
      color = f"C{index % 10}"
      for stage, style, marker in (("raw", "--", dict(marker="s", fillstyle="none")),
                                   ("tuned", "-", dict(marker="o"))):
        points = [(p["pretrain_flops"], p[stage][metric] if stage == "raw"
                   else p[stage][metric]["median"])
                  for p in v["points"] if metric in p[stage]]
        if points:
          xs, ys = zip(*points)
          ax.plot(xs, ys, style, color=color, label=f"{name} ({stage})", **marker)
    ax.set_xlabel("pretraining FLOPs")
    ax.set_ylabel(f"{EMBED_LABELS[metric]} x100")
    ax.set_title(f"{EMBED_LABELS[metric]}: raw (open squares), tuned (dots)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize="small")
  fig.tight_layout()
  path = _save(fig, fileio.join(workdir, "embed_vs_flops.png"))
  plt.close(fig)
  return path


def _plot_retrieval(plt, results: dict[str, Any], workdir: str) -> str:
  """retrieval_vs_flops.png: nDCG@10 and MRR@10, each variant (a colour) and stage (a marker)
  against pretraining FLOPs, tuned solid and raw dashed with open markers; BM25 alone as a
  grey horizontal line."""
  markers = {"single": "o", "multi": "s", "rerank": "^"}
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), squeeze=False)
  for metric, ax in zip(("retrieval/ndcg@10", "retrieval/mrr@10"), axes[0]):
    if metric in results["experiment"]["bm25"]:
      ax.axhline(results["experiment"]["bm25"][metric], color="grey", linestyle=":",
                 label="BM25 alone")
    for index, (name, v) in enumerate(results["variants"].items()):
      color = f"C{index % 10}"
      for stage in results["experiment"]["stages"]:
        for kind, style in (("raw", "--"), ("tuned", "-")):
          points = [(p["pretrain_flops"], _retrieval_value(results, p["stages"], stage, kind,
                                                          metric)) for p in v["points"]]
          points = [(x, y) for x, y in points if y is not None]
          if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, style, color=color, marker=markers[stage],
                    fillstyle="none" if kind == "raw" else "full",
                    label=f"{name} {stage} ({kind})")
    ax.set_xlabel("pretraining FLOPs")
    ax.set_ylabel(f"{EMBED_LABELS[metric]} x100")
    ax.set_title(f"{EMBED_LABELS[metric]}: tuned (filled), raw (open)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize="x-small")
  fig.tight_layout()
  path = _save(fig, fileio.join(workdir, "retrieval_vs_flops.png"))
  plt.close(fig)
  return path


def plot(results: dict[str, Any], variants: Sequence[spec.Variant], workdir: str) -> list[str]:
  """glue_vs_flops.png (downstream "embed": embed_vs_flops.png) and pretraining_curves.png in
  `workdir`; returns the paths written."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  written = []

  if results["experiment"].get("downstream") == "embed":
    written.append(_plot_embed(plt, results, workdir))
  elif results["experiment"].get("downstream") == "retrieval":
    written.append(_plot_retrieval(plt, results, workdir))
  else:
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, v in results["variants"].items():
      points = [(p["pretrain_flops"], p["glue"]) for p in v["points"] if "glue" in p]
      if points:
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("pretraining FLOPs")
    ax.set_ylabel("GLUE dev score (mean of task medians)")
    ax.set_title("GLUE score against pretraining compute")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend()
    path = fileio.join(workdir, "glue_vs_flops.png")
    written.append(_save(fig, path))
    plt.close(fig)

  fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
  for (key, title), ax in zip(CURVES, axes.flat):
    for v in variants:
      metrics_path = fileio.join(workdir, "variants", v.name, "pretrain", "metrics.jsonl")
      if not fileio.exists(metrics_path):
        continue
      rows = [(r["step"] * v.flops_per_step, r[key]) for r in metrics_lib.read_metrics(
          metrics_path) if key in r and math.isfinite(r[key])]
      if rows:
        xs, ys = zip(*rows)
        ax.plot(xs, ys, marker="o" if key.startswith("eval/") else None, markersize=3,
                label=v.name)
    ax.set_title(title)
    ax.set_xlabel("pretraining FLOPs")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize="small")
  fig.tight_layout()
  written.append(_save(fig, fileio.join(workdir, "pretraining_curves.png")))
  plt.close(fig)
  return written


def _save(fig, path: str) -> str:
  """Writes a figure as PNG through fileio (atomically; local or gs://)."""
  import io  # pylint: disable=import-outside-toplevel
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=110)
  fileio.write_atomic(path, buffer.getvalue())
  return path


def write(config: ml_collections.ConfigDict, variants: Sequence[spec.Variant], workdir: str,
          plots: bool = True) -> dict[str, Any]:
  """Collects the results and writes results.json, results.md (and the plots)."""
  results = collect(config, variants, workdir)
  if jax.process_index() == 0:
    fileio.write_atomic(fileio.join(workdir, "results.json"),
                        json.dumps(results, indent=2) + "\n")
    fileio.write_atomic(fileio.join(workdir, "results.md"), markdown(results))
    if plots:
      plot(results, variants, workdir)
  return results
