# syntax=docker/dockerfile:1
# Builder and runtime on the same Python (3.11, Debian bookworm): wheels built in the first
# stage run unchanged in the second. Pin the base by digest in your registry mirror.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /venv/fn
COPY pyproject.toml README.md ./
COPY function ./function
RUN /venv/fn/bin/pip install --no-compile . \
 && /venv/fn/bin/python -m compileall -q /venv/fn

FROM ${PYTHON_IMAGE} AS runtime
# Byte code is compiled at build time, so the root filesystem can be mounted read-only.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/venv/fn/bin:$PATH
COPY --from=build /venv/fn /venv/fn
USER 65532:65532
EXPOSE 9443
ENTRYPOINT ["/venv/fn/bin/sack8s", "serve"]
