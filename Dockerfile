# The image deploy/k8s/values.yaml names (registry.example.com/optima/optima-pipelines:<version>):
# the code server (the chart's user deployment), each run's pod (K8sRunLauncher), and the chart's
# webserver and daemon (they import our run coordinator). Build from the repository root:
#
#   docker build -t registry.example.com/optima/optima-pipelines:0.1.0 .
#
# Multi-stage: the build stage installs the package and its `k8s` extra into a virtualenv; the runtime
# stage copies only that virtualenv and runs as an unprivileged user. The base image is pinned to an
# exact Python release (add its @sha256 digest where you build: `docker buildx imagetools inspect`).
# Not built by the test suite: tests/unit/test_k8s_deploy.py reads this file (docs/deploy.md).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY setup.py pyproject.toml README.md ./
COPY optima_pipelines ./optima_pipelines
COPY wb_simulator ./wb_simulator
RUN python -m venv /opt/venv && /opt/venv/bin/pip install ".[k8s]"

FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 optima \
    && useradd --system --uid 10001 --gid optima --home-dir /opt/dagster --create-home optima \
    && mkdir -p /opt/dagster/dagster_home /tmp/optima \
    && chown -R optima:optima /opt/dagster /tmp/optima
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    OPTIMA_STATE_DIR=/tmp/optima \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /opt/dagster
EXPOSE 3030
# The chart starts the code server with its own arguments (codeServerArgs); this is the same command
# for `docker run`.
CMD ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "3030", "-m", "optima_pipelines.definitions", "--location-name", "optima_pipelines"]
