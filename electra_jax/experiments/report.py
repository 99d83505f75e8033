"""An experiment's results from its directory: results.json, results.md and the plots.

Everything is read back from the files the runs wrote (variant.json, timing.json, each
fine-tuning point's results.json, the pretraining metrics.jsonl), so the report of an
interrupted or partly finished experiment shows what exists, and rewriting it is idempotent.

Scores are GLUE dev metrics x100 (the paper's: MCC for CoLA, Spearman for STS-B, accuracy
otherwise; MNLI matched), each the median over the fine-tuning seeds; a variant's GLUE score is
the mean of its tasks' medians, given only when every configured task has one.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import jax
import ml_collections

from electra_jax import fileio
from electra_jax.experiments import spec
from electra_jax.finetune import glue
from electra_jax.finetune.glue import task as glue_finetune
from electra_jax.training import metrics as metrics_lib

# Panels of pretraining_curves.png: (metrics.jsonl key, title). Each variant draws the ones it
# logs; the masked-LM accuracy is the generator's for the ELECTRA family, the model's own for
# the MLM family.
CURVES = (("train/loss", "training loss (the objective's own)"),
          ("train/masked_lm_accuracy", "masked-LM accuracy (ELECTRA: the generator's)"),
          ("train/disc_loss", "discriminator loss"),
          ("eval/disc_auc", "held-out discriminator AUC"))


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


def collect(config: ml_collections.ConfigDict, variants: Sequence[spec.Variant], workdir: str
            ) -> dict[str, Any]:
  """The results.json content from what is on disk."""
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


def markdown_table(results: dict[str, Any]) -> str:
  """One row per variant: steps, FLOPs, each task's median, the GLUE average, the times."""
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


def markdown(results: dict[str, Any]) -> str:
  """results.md: the budget, the main table, per-seed scores, held-out pretraining metrics."""
  e = results["experiment"]
  ref = results["variants"][e["reference_variant"]]
  budget = (f"every variant spends the pretraining FLOPs of {e['reference_steps']} steps of "
            f"{e['reference_variant']} ({ref['pretrain_flops']:.3g} FLOPs)"
            if e["budget"] == "flops" else
            f"every variant runs {e['reference_steps']} pretraining steps")
  parts = [
      "# Experiment results", "",
      f"Pretraining: `{e['pretrain_config']}` with `{e['pretrain_overrides'] or '(no overrides)'}`"
      + (f" and `{e['data_overrides']}`" if e["data_overrides"] else "") + f"; {budget}."
      + f" Fine-tuning: {', '.join(e['tasks'])}, the median of {e['num_seeds']} seed(s) "
      "per task (GLUE dev, x100; GLUE = the mean of the task medians).", "",
      markdown_table(results), "",
      "Per-seed scores:", "", _seed_table(results), ""]
  if any(len(v["points"]) > 1 for v in results["variants"].values()):
    parts += ["GLUE at each fine-tuned checkpoint:", "", _points_table(results), ""]
  parts += [
      "Held-out pretraining metrics at the last evaluation:", "", _eval_table(results), "",
      "Variants:", ""]
  for name, v in results["variants"].items():
    parts.append(f"- `{name}`: `{v['overrides'] or '(the pretraining config as it is)'}`; "
                 f"{v['steps']} steps x {v['flops_per_step']:.3g} FLOPs")
  parts += ["", "![GLUE against pretraining FLOPs](glue_vs_flops.png)", "",
            "![Pretraining curves](pretraining_curves.png)", ""]
  return "\n".join(parts)


def plot(results: dict[str, Any], variants: Sequence[spec.Variant], workdir: str) -> list[str]:
  """glue_vs_flops.png and pretraining_curves.png in `workdir`; returns the paths written."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  written = []

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
