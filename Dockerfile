# electra-jax in a container: for Google Kubernetes Engine (launch/gke_run.sh) and any machine
# with Docker. Built by launch/image.sh:
#   docker build --build-arg VARIANT=tpu -t electra-jax .        (tpu | gpu | cpu)
# The dependencies are installed before the code is copied, so a change to the code rebuilds
# only the last layers. The entry point is the pretraining command; the JobSet sets its own.
FROM python:3.11-slim

# The JAX build for the accelerator: tpu (libtpu), gpu (CUDA 12 wheels) or cpu.
ARG VARIANT=tpu
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=3

WORKDIR /electra-jax

# Dependencies first: setup.py and the README it reads, with an empty package, installed with
# the variant's JAX; this layer is kept while only the code changes.
COPY setup.py README.md ./
# (The versions are setup.py's ranges, as for a pip install of the checkout.)
# hadolint ignore=DL3013
RUN mkdir electra_jax && touch electra_jax/__init__.py \
    && case "$VARIANT" in \
         tpu) extra='.[tpu]' ;; \
         gpu) extra='.'; jax='jax[cuda12]>=0.10,<0.11' ;; \
         cpu) extra='.' ;; \
         *) echo "VARIANT must be tpu, gpu or cpu, not '$VARIANT'" >&2; exit 1 ;; \
       esac \
    && pip install "$extra" ${jax:+"$jax"} \
    && pip uninstall --yes electra-jax \
    && rm -rf electra_jax

# The code and the configs.
COPY electra_jax ./electra_jax
COPY configs ./configs
RUN pip install --no-deps . && python -c "import electra_jax"

ENTRYPOINT ["python", "-m", "electra_jax.main"]
CMD ["--help"]
