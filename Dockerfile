# syntax=docker/dockerfile:1
# Builder and runtime on the same Python (3.11, Debian bookworm): the venv built in the first
# stage runs unchanged in the second. The base is pinned by tag here; CI pins it by digest:
#   docker build --build-arg PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:<digest> .
# The runtime works with a read-only root filesystem (readOnlyRootFilesystem: true, no
# emptyDir): byte code is compiled at build time and nothing is written at runtime
# (tests/test_reliability_container.py).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /venv/fn
COPY pyproject.toml README.md ./
COPY function ./function
RUN /venv/fn/bin/pip install --no-compile . \
 && /venv/fn/bin/python -m compileall -q -j 0 /venv/fn

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="function-sack8s" \
      org.opencontainers.image.description="Crossplane composition function: one SACK8sComponentVersion claim composes an OCM component's namespaces, RBAC, secrets and Flux delivery" \
      org.opencontainers.image.licenses="Apache-2.0"
# HOME points nowhere on purpose: nothing may write there (read-only root).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/venv/fn/bin:$PATH HOME=/nonexistent
COPY --from=build /venv/fn /venv/fn
WORKDIR /
USER 65532:65532
# 9443: gRPC (Crossplane). Metrics are opt-in: --metrics-address 0.0.0.0:9090 / SACK8S_METRICS_ADDRESS.
EXPOSE 9443
ENTRYPOINT ["/venv/fn/bin/sack8s", "serve"]
