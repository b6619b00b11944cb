"""A bench-only code location: one trivial job, to measure what the orchestration itself costs.

Loaded by ``bench/orchestration.py`` as ``optima-pipelines dev -m bench.location``, on the
project's own ``dagster.yaml`` (the same run coordinator, queue and launcher as production).
"""

from dagster import Definitions, in_process_executor, job, op


@op
def nothing() -> None:
    """Does nothing: the run's cost is the queue, the launch and the worker process."""


@job
def trivial() -> None:
    nothing()


# One process per run, as the production location (optima_pipelines/definitions.py).
defs = Definitions(jobs=[trivial], executor=in_process_executor)
