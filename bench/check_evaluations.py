"""Benchmark: storing a ranged run's asset check evaluations, together against one by one.

    python bench/check_evaluations.py [--quick] [--partitions 3000] [--rounds 2]

The mart's checks (assets/rnp.py) evaluate three checks per cabinet and day of a re-aggregation run:
a run over 1,000 cabinets × 3 days yields 9,000 evaluations. Here a run of the same shape, an asset
with three partitioned checks whose step yields an evaluation per check and partition of the run
(``--partitions`` keys ``cabinet|day``, the run over all of them), executes in process on a scratch
environment, with the deployment's storage: its evaluations stored together
(``dagster_internals.store_check_evaluations_in_batches``). Baseline, same run, alternating rounds:
the same run with Dagster's own ``store_event``, each evaluation an INSERT of its event and an
UPDATE of its check's row. Measured per run: this process's CPU (the run's creation and execution),
the PostgreSQL server's CPU, and the wall time; the fastest round of each way is reported.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "a ranged run's asset check evaluations: stored together vs one by one (Dagster's own)"
OPTIONS = [
    Option("partitions", 3000, 300, "partitions of the run (three evaluations each)"),
    Option("rounds", 2, 1, "runs each way (alternating); the fastest of each is reported"),
]
CHECKS = ("orders_match", "ad_spend_matches", "payout_matches")


def run(bench: Bench, opts: argparse.Namespace) -> None:
    from dagster import (
        AssetCheckEvaluation,
        AssetCheckSpec,
        AssetKey,
        AssetSelection,
        Definitions,
        StaticPartitionsDefinition,
        asset,
        define_asset_job,
        multi_asset_check,
    )

    from optima_pipelines.partitions import RANGE_END_TAG, RANGE_START_TAG

    keys = [f"c{n // 3:04d}|2026-11-{n % 3 + 1:02d}" for n in range(opts.partitions)]
    partitions = StaticPartitionsDefinition(keys)

    @asset(partitions_def=partitions)
    def mart() -> None: ...

    @multi_asset_check(
        specs=[AssetCheckSpec(name, asset="mart", partitions_def=partitions) for name in CHECKS], can_subset=True
    )
    def mart_checks(context):  # type: ignore[no-untyped-def]
        for key in context.partition_keys:
            for name in CHECKS:
                yield AssetCheckEvaluation(
                    asset_key=AssetKey("mart"),
                    check_name=name,
                    passed=True,
                    partition=key,
                    description="equal",
                    metadata={"mart": 1, "feeds": 1},
                )

    job = Definitions(
        assets=[mart],
        asset_checks=[mart_checks],
        jobs=[define_asset_job("checks", selection=AssetSelection.checks_for_assets(mart), partitions_def=partitions)],
    ).resolve_job_def("checks")

    with bench.environment("checkevals") as env:
        instance = env.instance()
        storage = instance.event_log_storage
        ways = {"together": storage.store_event, "one by one": type(storage).store_event.__get__(storage)}
        best: dict[str, dict[str, float]] = {}
        for _ in range(opts.rounds):
            for way, store_event in ways.items():
                storage.store_event = store_event
                cpu, pg, wall = time.process_time(), harness.postgres_cpu(), time.perf_counter()
                result = job.execute_in_process(
                    instance=instance, tags={RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]}
                )
                got = {
                    "cpu": time.process_time() - cpu,
                    "pg": harness.postgres_cpu() - pg,
                    "wall": time.perf_counter() - wall,
                }
                if not result.success:
                    raise RuntimeError(f"the {way} run failed")
                harness.say(
                    f"    {way}: {got['wall']:.1f} s, process CPU {got['cpu']:.2f} s, PostgreSQL CPU {got['pg']:.2f} s "
                    f"(load {harness.load_average():.1f})"
                )
                if way not in best or got["cpu"] + got["pg"] < best[way]["cpu"] + best[way]["pg"]:
                    best[way] = got
        storage.store_event = ways["together"]

    n = len(keys) * len(CHECKS)
    base = "one by one (Dagster's own)"
    for key, name in (("cpu", "process CPU"), ("pg", "PostgreSQL CPU"), ("wall", "wall time")):
        bench.figure(
            f"{name} per evaluation ({n:,} in one run)",
            best["together"][key] / n * 1000,
            "ms",
            baseline_name=base,
            baseline=best["one by one"][key] / n * 1000,
            higher_is_better=False,
        )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
