"""Prometheus metrics: the original's names, read from Dagster's run storage and the warehouse at scrape time.

What a scrape costs (bench/ops_metrics_scrape.py measures it): a handful of indexed queries, none
of which scans the run history:

- Dagster's run storage (schema ``dagster_<env>``) is read with SQL, not through
  ``DagsterInstance``: the public API would need one count query per (queue, status) pair, and has
  no way to group by a tag (the bench compares both). Queries use Dagster's own indexes
  (``idx_run_status``, ``idx_run_range``, ``idx_run_tags``) and only touch queued/running runs and
  those that finished in the last 24 hours.
- Feed sync and re-aggregation figures come from the totals tables that ``operations.records`` keeps (one
  row per (feed, cabinet)), so counters are exact and monotonic.
- Run durations feed a real histogram: each scrape reads only the runs that finished since the
  previous one.

No metric has a cabinet label but one: ``optima_feed_stale_cabinet_age_seconds`` names the
``freshness.TOP`` stalest cabinets of each feed, so its series stay bounded whatever the number of
cabinets (at most TOP x feeds). Other per cabinet detail is in ``ops_feed_syncs`` /
``ops_reaggregations``, the feeds' freshness checks and the Dagster UI.

Names: the original's families keep their names (``optima_queue_jobs``, ``optima_queue_job_duration_ms``,
``optima_reaggregate_*``, ``optima_rnp_sync_*``, ``optima_digitization_feed_sync_*`` and the
``optima_feed_sync_*`` of the other feeds, which mirror them); new names follow Prometheus' conventions
(``promtool check metrics`` finds nothing else to say: tests/dagster/test_prometheus.py).

Extending: add a query under ``operations/sql/`` and a ``_collect_*`` method; keep it indexed and bounded.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.operations import workers
from optima_pipelines.operations.freshness import CAUSES, WATCHED_FEEDS, read_freshness
from optima_pipelines.operations.records import METRIC_FAMILIES, metric_family
from optima_pipelines.orchestration.queues import (
    ASSET_QUEUES,
    QUEUES,
    SKIPPED_ACCOUNT_BUSY,
    SWEEP_OUTCOMES,
    TAG_QUEUE,
    TAG_SKIPPED,
)
from optima_pipelines.settings import run_launcher_choice
from optima_pipelines.warehouse.cabinets import STATUSES as CABINET_STATUSES

load = SqlFiles(__file__)

logger = logging.getLogger(__name__)

#: Bucket bounds of ``optima_queue_job_duration_ms`` (ms): a run costs ~2 s before any work.
DURATION_BUCKETS_MS = (1000, 2000, 5000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000)
#: Finished runs read per scrape at most; the rest are read by the next scrapes.
FINISHED_BATCH = 5000
#: Runs may commit their final status slightly out of order: re-read this far behind the watermark.
WATERMARK_OVERLAP_SECONDS = 120

FEED_FAMILIES = sorted({*METRIC_FAMILIES.values(), metric_family("")})
TAGS = {"queue_tag": TAG_QUEUE, "skipped_tag": TAG_SKIPPED}
#: The run storage's column that says since when a run is in the status (``oldest_run_age.sql``).
AGE_SINCE = {"QUEUED": "create_timestamp", "STARTING": "update_timestamp"}

# Every series a dashboard or an alert names exists from the first scrape, at 0 until something
# happens: a query on a fresh deployment returns 0, not "no data".
RUN_STATUSES = ("queued", "running", "success", "failure", "canceled")
FINISHED_STATUSES = ("success", "failure", "canceled")
#: The feeds each metric family reports: every asset synced from WB, under its queue's family.
FEEDS_BY_FAMILY: dict[str, list[str]] = {family: [] for family in FEED_FAMILIES}
for _asset, _queue in sorted(ASSET_QUEUES.items()):
    if QUEUES[_queue].talks_to_wb:
        FEEDS_BY_FAMILY[metric_family(_queue)].append(_asset)


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS_MS) + 1))
    total_ms: float = 0.0

    def observe(self, value_ms: float) -> None:
        self.buckets[bisect.bisect_left(DURATION_BUCKETS_MS, value_ms)] += 1
        self.total_ms += value_ms

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip([*map(str, DURATION_BUCKETS_MS), "+Inf"], self.buckets, strict=True):
            running += n
            out.append((bound, running))
        return out


def _each_queue() -> Iterator[tuple[str]]:
    return ((queue,) for queue in QUEUES)


def _fill(
    family: GaugeMetricFamily, zeros: Iterable[tuple[str, ...]], rows: Iterable[Sequence[Any]], zero: float = 0
) -> dict[tuple[str, ...], Any]:
    """Give ``family`` a sample for every label tuple of ``zeros`` (``zero`` where ``rows`` has none) and for
    each row (its labels, then its value), in label order, so that a series never vanishes; returns them."""
    figures: dict[tuple[str, ...], Any] = dict.fromkeys(zeros, zero)
    for *labels, value in rows:
        figures[tuple(labels)] = value
    for key, value in sorted(figures.items()):
        family.add_metric(list(key), value)
    return figures


def _filled_gauge(
    name: str,
    documentation: str,
    labels: list[str],
    zeros: Iterable[tuple[str, ...]],
    rows: Iterable[Sequence[Any]],
    zero: float = 0,
) -> GaugeMetricFamily:
    """A gauge family with a sample for every label tuple of ``zeros`` and for each row (:func:`_fill`)."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    _fill(family, zeros, rows, zero)
    return family


class OptimaCollector(Collector):
    """Reads the figures on every scrape. One connection, reopened when it breaks; scrapes are serialised."""

    def __init__(self, database_url: str, warehouse_schema: str, dagster_schema: str):
        self._url = database_url
        self._schema = warehouse_schema
        self._dagster = dagster_schema
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._watermark: datetime | None = None
        self._seen: dict[str, datetime] = {}
        self._durations: dict[str, _Histogram] = {}
        self._finished: dict[tuple[str, str], int] = {}
        #: The warm run workers execute the runs: their heartbeat and the broker are reported.
        self._run_workers = run_launcher_choice() == "celery"

    def _sql(self, name: str, **columns: str) -> sql.Composed:
        return sql.SQL(load(name)).format(  # type: ignore[arg-type]
            runs=sql.Identifier(self._dagster, "runs"),
            run_tags=sql.Identifier(self._dagster, "run_tags"),
            **{key: sql.Identifier(column) for key, column in columns.items()},
        )

    def _ages(self, conn: psycopg.Connection, status: str) -> list[tuple[str, float]]:
        """(queue, age in seconds of its oldest run in ``status``); clocks may disagree a little: never negative."""
        query = self._sql("oldest_run_age", since=AGE_SINCE[status])
        return [(queue, max(0.0, float(age))) for queue, age in conn.execute(query, {**TAGS, "status": status})]

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self._url, self._schema, autocommit=True, connect_timeout=5)
            # A scrape must never hang on a lock or a slow plan: fail fast and say so instead.
            self._conn.execute("SET statement_timeout = '10s'")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            started = time.perf_counter()
            families: list[Metric] = []
            up = 1
            try:
                conn = self._connection()
                families += self._collect_queue(conn)
                families += self._collect_finished(conn)
                families += self._collect_feeds(conn)
                families += self._collect_reaggregation(conn)
                families += self._collect_cabinets(conn)
                families += self._collect_sweeps(conn)
                if self._run_workers:
                    families += self._collect_run_workers(conn)
                families += self._collect_rejected_rows(conn)
                families += self._collect_freshness(conn)
                families += self._collect_dead_letter(conn)
            except Exception as exc:
                # Never a half-read scrape that looks like "all zero": report the failure instead.
                logger.warning("metrics scrape failed: %s: %s", exc.__class__.__name__, exc)
                families, up = [], 0
                if self._conn is not None and not self._conn.closed:
                    self._conn.close()
            yield from families
            yield GaugeMetricFamily("optima_metrics_up", "1 if the last scrape read every figure", value=up)
            yield GaugeMetricFamily(
                "optima_metrics_scrape_duration_seconds",
                "Time the last scrape spent reading the figures",
                value=time.perf_counter() - started,
            )

    # Dagster's run storage -------------------------------------------------------------------

    def _collect_queue(self, conn: psycopg.Connection) -> list[Metric]:
        jobs = _filled_gauge(
            "optima_queue_jobs",
            "Runs by queue (job kind) and status: queued and running now; success/failure/canceled: "
            "finished in the last 24 h",
            ["queue", "status"],
            ((queue, status) for queue in QUEUES for status in RUN_STATUSES),
            ((queue, status.lower(), n) for queue, status, n in conn.execute(self._sql("queue_runs"), TAGS)),
        )

        oldest = GaugeMetricFamily(
            "optima_queue_oldest_queued_run_age_seconds", "Age of the oldest queued run (0: none queued)"
        )
        by_queue = GaugeMetricFamily(
            "optima_queue_oldest_queued_age_seconds", "Age of the oldest queued run, per queue", labels=["queue"]
        )
        ages = _fill(by_queue, _each_queue(), self._ages(conn, "QUEUED"), zero=0.0)
        oldest.add_metric([], max(ages.values()))

        skipped = _filled_gauge(
            "optima_queue_jobs_skipped",
            "Runs that ended skipped (reason: account-busy, ...) in the last 24 h",
            ["queue", "reason"],
            ((queue, SKIPPED_ACCOUNT_BUSY) for queue in QUEUES),
            conn.execute(self._sql("skipped_runs"), TAGS),
        )
        starting = _filled_gauge(
            "optima_queue_oldest_starting_run_age_seconds",
            "Age of the oldest run launched but not started yet (STARTING), per queue (0: none)",
            ["queue"],
            _each_queue(),
            self._ages(conn, "STARTING"),
            zero=0.0,
        )
        return [jobs, oldest, by_queue, skipped, starting]

    def _collect_finished(self, conn: psycopg.Connection) -> list[Metric]:
        if self._watermark is None:
            # Counters start at this process's start: what finished before is in optima_queue_jobs.
            row = conn.execute("SELECT localtimestamp").fetchone()
            assert row is not None
            self._watermark = row[0]
        assert self._watermark is not None
        overlap = timedelta(seconds=WATERMARK_OVERLAP_SECONDS)
        rows = conn.execute(
            self._sql("finished_runs"), {**TAGS, "since": self._watermark - overlap, "limit": FINISHED_BATCH}
        ).fetchall()
        for run_id, queue, status, start_time, end_time, updated in rows:
            if run_id in self._seen:
                continue
            self._seen[run_id] = updated
            key = (queue, status.lower())
            self._finished[key] = self._finished.get(key, 0) + 1
            if start_time is not None and end_time is not None:
                self._durations.setdefault(queue, _Histogram()).observe(max(0.0, (end_time - start_time) * 1000))
            self._watermark = max(self._watermark, updated)
        horizon = self._watermark - overlap
        self._seen = {k: v for k, v in self._seen.items() if v >= horizon}

        finished = CounterMetricFamily(
            "optima_queue_jobs_finished",
            "Runs that finished while this exporter ran, by queue and final status",
            labels=["queue", "status"],
        )
        counts = {(queue, status): 0 for queue in QUEUES for status in FINISHED_STATUSES} | self._finished
        for (queue, status), n in sorted(counts.items()):
            finished.add_metric([queue, status], n)
        durations = HistogramMetricFamily(
            "optima_queue_job_duration_ms",
            "Run duration from start to end (ms), by queue, of runs that finished while this exporter ran",
            labels=["queue"],
        )
        histograms = {queue: _Histogram() for queue in QUEUES} | self._durations
        for queue, hist in sorted(histograms.items()):
            durations.add_metric([queue], hist.cumulative(), sum_value=hist.total_ms)
        return [finished, durations]

    # The warehouse ---------------------------------------------------------------------------

    def _collect_feeds(self, conn: psycopg.Connection) -> list[Metric]:
        out: list[Metric] = []
        by_family: dict[str, list[tuple[Any, ...]]] = {f: [] for f in FEED_FAMILIES}
        for row in conn.execute(load("feed_sync_totals")).fetchall():
            by_family[metric_family(row[0])].append(row)
        for family, rows in by_family.items():
            # A feed not synced yet: zero counts and no age (it has none).
            synced = {row[1] for row in rows}
            rows += [
                (None, f, 0, 0, 0, 0, 0, 0, 0, 0, None, None, 0) for f in FEEDS_BY_FAMILY[family] if f not in synced
            ]
            runs = CounterMetricFamily(f"{family}_runs", "Finished syncs by feed and status", labels=["feed", "status"])
            rows_total = CounterMetricFamily(
                f"{family}_rows", "Rows fetched from WB / inserted / updated, by feed", labels=["feed", "kind"]
            )
            # Counted in (cabinet, day) partitions, not a duration: "_days" would read as a unit.
            days = CounterMetricFamily(
                f"{family}_changed_partitions", "Cabinet-day partitions whose rows changed", labels=["feed"]
            )
            seconds = CounterMetricFamily(f"{family}_duration_seconds", "Time spent syncing", labels=["feed"])
            last = GaugeMetricFamily(
                f"{family}_last_success_age_seconds", "Seconds since the feed last synced any cabinet", labels=["feed"]
            )
            stalest = GaugeMetricFamily(
                f"{family}_oldest_cabinet_success_age_seconds",
                "Seconds since the least recently synced active cabinet last synced",
                labels=["feed"],
            )
            failing = GaugeMetricFamily(
                f"{family}_failing_cabinets", "Active cabinets whose last sync failed", labels=["feed"]
            )
            for _queue, feed, ok, failed, skipped, fetched, inserted, updated, changed, secs, age, old, bad in rows:
                for status, n in (("success", ok), ("failure", failed), ("skipped", skipped)):
                    runs.add_metric([feed, status], n)
                for kind, n in (("fetched", fetched), ("inserted", inserted), ("updated", updated)):
                    rows_total.add_metric([feed, kind], n)
                days.add_metric([feed], changed)
                seconds.add_metric([feed], secs)
                if age is not None:
                    last.add_metric([feed], float(age))
                if old is not None:
                    stalest.add_metric([feed], float(old))
                failing.add_metric([feed], bad)
            out += [runs, rows_total, days, seconds, last, stalest, failing]
        return out

    def _collect_reaggregation(self, conn: psycopg.Connection) -> list[Metric]:
        runs = CounterMetricFamily(
            "optima_reaggregate_requests", "Re-aggregations by РНП domain and status", labels=["domain", "status"]
        )
        requested = CounterMetricFamily(
            "optima_reaggregate_partitions_requested", "(cabinet, day) partitions asked for", labels=["domain"]
        )
        recomputed = CounterMetricFamily(
            "optima_reaggregate_partitions_recomputed", "(cabinet, day) partitions recomputed", labels=["domain"]
        )
        lag = SummaryMetricFamily(
            "optima_reaggregate_lag_seconds", "From the source change to its recompute", labels=["domain"]
        )
        for domain, ok, failed, skipped, req, rec, lag_sum, lag_n in conn.execute(
            load("reaggregation_totals")
        ).fetchall():
            for status, n in (("success", ok), ("failure", failed), ("skipped", skipped)):
                runs.add_metric([domain, status], n)
            requested.add_metric([domain], req)
            recomputed.add_metric([domain], rec)
            lag.add_metric([domain], count_value=lag_n, sum_value=lag_sum)
        recent = GaugeMetricFamily(
            "optima_reaggregate_recent_lag_seconds",
            "Lag quantiles over the last hour",
            labels=["domain", "quantile"],
        )
        for domain, p50, p95, top in conn.execute(load("reaggregation_recent_lag")).fetchall():
            for q, v in (("0.5", p50), ("0.95", p95), ("1", top)):
                recent.add_metric([domain, q], max(0.0, float(v)))
        return [runs, requested, recomputed, lag, recent]

    def _collect_cabinets(self, conn: psycopg.Connection) -> list[Metric]:
        cabinets = _filled_gauge(
            "optima_cabinets",
            "Cabinets by status",
            ["status"],
            ((status,) for status in CABINET_STATUSES),
            conn.execute(load("cabinets_by_status")),
        )
        return [cabinets]

    def _collect_sweeps(self, conn: psycopg.Connection) -> list[Metric]:
        cabinets = _filled_gauge(
            "optima_sweep_cabinets",
            "Cabinets of sweeps (one run over many cabinets) in the last 24 h by queue and outcome "
            "(skipped: account-busy, or no longer active)",
            ["queue", "outcome"],
            ((q.name, o) for q in QUEUES.values() if q.talks_to_wb for o in SWEEP_OUTCOMES),
            conn.execute(load("sweep_outcomes")),
        )
        return [cabinets]

    def _collect_run_workers(self, conn: psycopg.Connection) -> list[Metric]:
        beats = workers.alive_run_workers(conn)
        alive = GaugeMetricFamily(
            "optima_run_workers_alive",
            f"Run workers (serve run-worker) with a process that beat within {workers.ALIVE_WITHIN_SECONDS:g} s",
            value=len({b.name for b in beats}),
        )
        processes = GaugeMetricFamily(
            "optima_run_worker_processes_alive",
            "Run worker processes (each executes one run at a time) that beat within "
            f"{workers.ALIVE_WITHIN_SECONDS:g} s",
            value=len(beats),
        )
        broker = GaugeMetricFamily(
            "optima_broker_reachable",
            "1 if the run workers' broker answered this scrape",
            value=1 if workers.broker_reachable().ok else 0,
        )
        return [alive, processes, broker]

    def _collect_rejected_rows(self, conn: psycopg.Connection) -> list[Metric]:
        rows = GaugeMetricFamily(
            "optima_wb_rejected_rows",
            "Distinct rows WB sent in the last 24 h that syncs refused (a bad value: not stored) or flagged "
            "(a time in the future: stored), by feed; the rows themselves are in wb_rejected_rows",
            labels=["feed", "outcome"],
        )
        for feed, outcome, n in conn.execute(load("wb_rejected_rows")).fetchall():
            rows.add_metric([feed, outcome], n)
        return [rows]

    def _collect_freshness(self, conn: psycopg.Connection) -> list[Metric]:
        watched = GaugeMetricFamily(
            "optima_feed_watched_cabinets",
            "Cabinets whose feed is expected fresh (active, or token_invalid)",
            labels=["feed"],
        )
        stale = GaugeMetricFamily(
            "optima_feed_stale_cabinets",
            "Watched cabinets whose last confirmed sync of the feed is older than its allowance, or whose "
            "token WB rejected",
            labels=["feed"],
        )
        oldest = GaugeMetricFamily(
            "optima_feed_oldest_confirmation_age_seconds",
            "Seconds since the least recently confirmed watched cabinet's last confirmed sync of the feed",
            labels=["feed"],
        )
        allowance = GaugeMetricFamily(
            "optima_feed_freshness_allowance_seconds",
            "How old a cabinet's last confirmed sync of the feed may be (its cadence's period plus window)",
            labels=["feed"],
        )
        named = GaugeMetricFamily(
            "optima_feed_stale_cabinet_age_seconds",
            "The stalest cabinets of each feed (at most operations.freshness.TOP a feed): seconds since the last "
            f"confirmed sync, and the cause ({', '.join(CAUSES)})",
            labels=["feed", "cabinet", "cause"],
        )
        for feed in read_freshness(conn, WATCHED_FEEDS):
            watched.add_metric([feed.feed], feed.watched)
            stale.add_metric([feed.feed], feed.stale_count)
            oldest.add_metric([feed.feed], feed.oldest_seconds)
            allowance.add_metric([feed.feed], feed.allowance_seconds)
            for cabinet in feed.stale:
                named.add_metric([feed.feed, cabinet.cabinet_id, cabinet.cause], cabinet.age_seconds)
        return [watched, stale, oldest, allowance, named]

    def _collect_dead_letter(self, conn: psycopg.Connection) -> list[Metric]:
        kept = _filled_gauge(
            "optima_failed_runs_kept",
            "Failed runs kept in Dagster's storage (the dead-letter: prune_runs deletes only successful "
            "runs), per queue; growth means new failures",
            ["queue"],
            _each_queue(),
            conn.execute(self._sql("failed_runs_kept"), TAGS),
        )
        return [kept]


def build_registry(database_url: str, warehouse_schema: str, dagster_schema: str) -> tuple[CollectorRegistry, Any]:
    """A registry holding only our collector (no process/platform collectors: they are not ours to report)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = OptimaCollector(database_url, warehouse_schema, dagster_schema)
    registry.register(collector)
    return registry, collector
