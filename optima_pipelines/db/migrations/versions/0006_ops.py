"""Operations: the figures syncs and re-aggregations record for /metrics, and the WB ping log of health checks.

Revision ID: 0006_ops
Revises: 0005_engines

Each sync and each re-aggregation writes one history row (what happened, for people) and bumps its
row in a totals table keyed by (subject, cabinet) (what /metrics reads: monotonic counters from a
few thousand rows, never a scan of the history). The totals are keyed per cabinet, not per feed
alone, so that two cabinets finishing at once never wait on one hot row: the cabinet gate already
keeps one run per cabinet. Writers: ``optima_pipelines.operations.records``.
"""

from alembic import op

revision = "0006_ops"
down_revision = "0005_engines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- One row per finished sync of one feed for one cabinet (record_feed_sync).
        CREATE TABLE ops_feed_syncs (
            id             bigserial PRIMARY KEY,
            queue          text NOT NULL,               -- the original queue (optima/queue tag)
            feed           text NOT NULL,               -- the table / asset it fills, e.g. wb_orders
            cabinet_id     text NOT NULL,
            run_id         text,
            trigger        text NOT NULL,
            status         text NOT NULL CHECK (status IN ('success', 'failure', 'skipped')),
            rows_fetched   bigint NOT NULL DEFAULT 0 CHECK (rows_fetched >= 0),
            rows_inserted  bigint NOT NULL DEFAULT 0 CHECK (rows_inserted >= 0),
            rows_updated   bigint NOT NULL DEFAULT 0 CHECK (rows_updated >= 0),
            changed_days   integer NOT NULL DEFAULT 0 CHECK (changed_days >= 0),
            started_at     timestamptz NOT NULL,
            finished_at    timestamptz NOT NULL,
            error          text,
            CHECK (finished_at >= started_at)
        );
        CREATE INDEX ops_feed_syncs_finished_idx ON ops_feed_syncs (finished_at);
        CREATE INDEX ops_feed_syncs_cabinet_idx ON ops_feed_syncs (cabinet_id, feed, finished_at);

        CREATE TABLE ops_feed_sync_totals (
            feed              text NOT NULL,
            cabinet_id        text NOT NULL,
            queue             text NOT NULL,
            syncs_success     bigint NOT NULL DEFAULT 0,
            syncs_failure     bigint NOT NULL DEFAULT 0,
            syncs_skipped     bigint NOT NULL DEFAULT 0,
            rows_fetched      bigint NOT NULL DEFAULT 0,
            rows_inserted     bigint NOT NULL DEFAULT 0,
            rows_updated      bigint NOT NULL DEFAULT 0,
            changed_days      bigint NOT NULL DEFAULT 0,
            seconds_total     double precision NOT NULL DEFAULT 0,
            last_status       text NOT NULL,
            last_finished_at  timestamptz NOT NULL,
            last_success_at   timestamptz,
            PRIMARY KEY (feed, cabinet_id)
        );

        -- One row per re-aggregation of one РНП domain for one cabinet (record_reaggregation).
        CREATE TABLE ops_reaggregations (
            id                     bigserial PRIMARY KEY,
            domain                 text NOT NULL,       -- rnp-sales, rnp-ads, rnp-finance, rnp-funnel, merge...
            cabinet_id             text NOT NULL,
            run_id                 text,
            trigger                text NOT NULL,
            status                 text NOT NULL CHECK (status IN ('success', 'failure', 'skipped')),
            partitions_requested   integer NOT NULL DEFAULT 0 CHECK (partitions_requested >= 0),
            partitions_recomputed  integer NOT NULL DEFAULT 0 CHECK (partitions_recomputed >= 0),
            -- When the change that asked for this recompute was stored (the feed's materialization).
            source_event_at        timestamptz,
            started_at             timestamptz NOT NULL,
            finished_at            timestamptz NOT NULL,
            error                  text,
            CHECK (finished_at >= started_at)
        );
        CREATE INDEX ops_reaggregations_finished_idx ON ops_reaggregations (finished_at);

        CREATE TABLE ops_reaggregation_totals (
            domain                 text NOT NULL,
            cabinet_id             text NOT NULL,
            runs_success           bigint NOT NULL DEFAULT 0,
            runs_failure           bigint NOT NULL DEFAULT 0,
            runs_skipped           bigint NOT NULL DEFAULT 0,
            partitions_requested   bigint NOT NULL DEFAULT 0,
            partitions_recomputed  bigint NOT NULL DEFAULT 0,
            lag_seconds_total      double precision NOT NULL DEFAULT 0,
            lag_count              bigint NOT NULL DEFAULT 0,
            last_finished_at       timestamptz NOT NULL,
            PRIMARY KEY (domain, cabinet_id)
        );

        -- WB allows 3 /ping calls per 30 s per host: every health check, from any process, logs its
        -- pings here and reuses a recent answer instead of asking again.
        CREATE TABLE ops_wb_pings (
            host        text NOT NULL,
            pinged_at   timestamptz NOT NULL DEFAULT now(),
            ok          boolean NOT NULL,
            detail      text NOT NULL
        );
        CREATE INDEX ops_wb_pings_host_idx ON ops_wb_pings (host, pinged_at);
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TABLE ops_wb_pings, ops_reaggregation_totals, ops_reaggregations, ops_feed_sync_totals, ops_feed_syncs"
    )
