"""Fine-tuning: `python -m electra_jax.finetune --config=configs/{glue,squad,classify,tag}.py`.

The core, which every family shares:

  task.py        the `Task` interface a family implements, and its small dataclasses
  families.py    the registry: config.task_family -> the family's Task
  driver.py      the one multi-seed driver: seeds, resumption, medians, results.json,
                 prediction-only runs
  seed.py        the one per-seed loop: train (resumable), evaluate, write files, save the model
  recipe.py      the original recipe (learning rate, layer decay per size), config checks
  setup.py       encoder config, tokenizer, optimizer and jitted steps, the initial state
  batches.py     seeded training batches, padded evaluation batches
  heads.py       sentence- and token-level heads on the encoder
  metrics.py     metric functions (accuracy, F1, MCC, correlations, ...)
  shared/        helpers of several families: sentence pairs (`pairs`), sliding windows
                 (`windows`), label files (`labels`)

The families, each a package that imports only the core and shared/:

  glue/      GLUE tasks, readers, metrics, submission files (configs/glue.py)
  qa/        SQuAD 1.1 and 2.0 (configs/squad.py)
  classify/  one's own csv / tsv / jsonl files (configs/classify.py)
  tagging/   token classification on CoNLL files (configs/tag.py)
"""
