"""A code server whose run workers are forked from a preloaded forkserver (issue 17, way (b)).

    python -m optima_pipelines.operations.forkserver_code_server -m MODULE [dagster api grpc options]

``serve code-server`` runs this instead of ``dagster code-server start`` when
OPTIMA_CODE_SERVER_FORKSERVER=1: ``dagster api grpc`` in this process, with its run workers forked
from a process that imported Dagster and MODULE once (dagster_internals.fork_run_workers_from_preloaded_server).
Measured beside the default launcher and the warm run workers by bench/orchestration.py; the
deployment's choice is the warm run workers (orchestration/run_launcher.py), see docs/performance.md.
"""

from __future__ import annotations

import sys

from optima_pipelines.orchestration.dagster_internals import (
    RUN_EXECUTION_MODULES,
    fork_run_workers_from_preloaded_server,
    run_dagster_cli,
)


def main(argv: list[str]) -> None:
    module = argv[argv.index("-m") + 1] if "-m" in argv else "optima_pipelines.definitions"
    fork_run_workers_from_preloaded_server([*RUN_EXECUTION_MODULES, module])
    run_dagster_cli(["api", "grpc", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
