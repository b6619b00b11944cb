"""``python -m optima_pipelines.operations.daemon run -w WORKSPACE``: dagster-daemon, its sensor loop every second.

Dagster's sensor daemon wakes every 5 s (a constant, not a setting) and evaluates the sensors
whose ``minimum_interval_seconds`` has passed. A user import waits for two sensor ticks (the
requests sensor launches the import, the re-aggregation sensor its РНП), so with a 5-s loop a
sensor's interval cannot go below 5 s and each tick costs 2.5 s on average however short its interval
(bench/freshness.py). With a 1-s loop, a sensor with a 2-s interval ticks every 2 s. The loop only
compares timestamps between ticks: the sensors' own intervals keep their cost bounded.

The daemon also stores events in batches (``enable_event_batches``, as the run workers do). A run a
sensor or a backfill creates gets an ASSET_MATERIALIZATION_PLANNED event per asset and partition,
written by the daemon while it creates the run: a re-aggregation run over 1,000 cabinets × 2 days
is 8,000 of them; dagster-postgres stores such a batch one event at a time, which held the sensor's
tick (and so its next tick) 7-15 s a run (issue 17's scale bench: ticks 385 s apart at N = 1,000),
so our storage stores them in one INSERT (``dagster_internals.store_planned_events_in_batches``).
"""

from __future__ import annotations

import sys

from optima_pipelines.orchestration.dagster_internals import (
    enable_event_batches,
    run_dagster_daemon,
    set_sensor_loop_seconds,
)

#: How often the daemon's sensor loop wakes (Dagster's default: 5 s).
SENSOR_LOOP_SECONDS = 1


def main() -> None:
    set_sensor_loop_seconds(SENSOR_LOOP_SECONDS)
    enable_event_batches()
    sys.argv[0] = "dagster-daemon"
    run_dagster_daemon()


if __name__ == "__main__":
    main()
