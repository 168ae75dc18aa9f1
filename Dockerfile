# syntax=docker/dockerfile:1
# Builder and runtime on the same Python (3.11, Debian bookworm): the venv built in the first
# stage runs unchanged in the second. The default base is the official image pinned by digest;
# any Debian bookworm image with python3, python3-venv and ca-certificates works as well:
#   docker build --build-arg PYTHON_IMAGE=<image>@sha256:<digest> .
# hack/image.sh builds such a base from Debian packages (no container registry needed) and the
# image from this file (docs/image.md).
# The runtime works with a read-only root filesystem (readOnlyRootFilesystem: true, no
# emptyDir): byte code is compiled at build time and nothing is written at runtime
# (tests/test_reliability_container.py, tests/test_image.py).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /venv/fn
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
