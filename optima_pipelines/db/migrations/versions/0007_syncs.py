"""The other WB syncs: report lines known from both WB's API and a user's upload, stock snapshots, news pacing.

Revision ID: 0007_syncs
Revises: 0006_ops

- ``report_line_key(...)``: a fingerprint of what identifies a realization-report line both in WB's
  finance API and in the report a user downloads from the seller portal (which has no rrdId): the
  source order, the operation, the product, the sale day, the counts and the money. A line known
  from both is stored once (optima_pipelines/sync/finance.py): an uploaded line whose twin the API
  already delivered is not stored, and an API line replaces its uploaded twin. Uploaded lines
  (``source = 'user_report'``) get negative synthetic ``rrd_id`` values, never one of WB's, and
  ``line_seq`` numbers the identical lines of one upload (1, 2, ...; NULL for API lines).
- ``stocks``: ``loaded_at`` and a default ``snapshot_at``, so that an hourly snapshot equal to the
  last one changes no row: ``snapshot_at`` is the first snapshot of the day that showed the row,
  ``loaded_at`` the last one that changed it.
- ``news_sync_state``: WB allows one news request a minute whichever cabinet's token asks, so the
  time of the last request is kept across runs and processes, in one row.
"""

from alembic import op

revision = "0007_syncs"
down_revision = "0006_ops"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- Immutable (an index uses it): Moscow days as integers rather than date text, whose format
        -- depends on DateStyle; numbers without trailing zeros (WB's "367" and a sheet's 367.0).
        CREATE FUNCTION report_line_key(
            srid text, seller_oper_name text, doc_type_name text, nm_id bigint, sale_dt timestamptz,
            quantity integer, delivery_amount integer, return_amount integer, retail_amount numeric,
            for_pay numeric, delivery_service numeric, penalty numeric, paid_storage numeric,
            paid_acceptance numeric, deduction numeric
        ) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN md5(
            coalesce(btrim(srid), '') || '|' || coalesce(lower(btrim(seller_oper_name)), '') || '|'
            || coalesce(lower(btrim(doc_type_name)), '') || '|' || coalesce(nm_id, 0)::text || '|'
            || coalesce(((sale_dt AT TIME ZONE 'Europe/Moscow')::date - date '2000-01-01')::text, '') || '|'
            || coalesce(quantity, 0)::text || '|' || coalesce(delivery_amount, 0)::text || '|'
            || coalesce(return_amount, 0)::text || '|'
            || trim_scale(coalesce(retail_amount, 0))::text || '|' || trim_scale(coalesce(for_pay, 0))::text || '|'
            || trim_scale(coalesce(delivery_service, 0))::text || '|' || trim_scale(coalesce(penalty, 0))::text || '|'
            || trim_scale(coalesce(paid_storage, 0))::text || '|' || trim_scale(coalesce(paid_acceptance, 0))::text
            || '|' || trim_scale(coalesce(deduction, 0))::text
        );
        CREATE INDEX wb_report_lines_line_key_idx ON wb_report_lines (
            cabinet_id,
            report_line_key(srid, seller_oper_name, doc_type_name, nm_id, sale_dt, quantity, delivery_amount,
                            return_amount, retail_amount, for_pay, delivery_service, penalty, paid_storage,
                            paid_acceptance, deduction)
        );

        ALTER TABLE wb_report_lines ADD COLUMN line_seq integer;
        CREATE INDEX wb_report_lines_uploaded_idx ON wb_report_lines (cabinet_id) WHERE source = 'user_report';

        ALTER TABLE stocks ADD COLUMN loaded_at timestamptz NOT NULL DEFAULT now();
        ALTER TABLE stocks ALTER COLUMN snapshot_at SET DEFAULT now();

        CREATE TABLE news_sync_state (
            id               boolean PRIMARY KEY DEFAULT true CHECK (id),
            last_request_at  timestamptz,
            last_cabinet_id  text,                      -- whose token the last request used
            last_error       text,
            updated_at       timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO news_sync_state (id) VALUES (true);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE news_sync_state;
        ALTER TABLE stocks ALTER COLUMN snapshot_at DROP DEFAULT;
        ALTER TABLE stocks DROP COLUMN loaded_at;
        DROP INDEX wb_report_lines_uploaded_idx;
        ALTER TABLE wb_report_lines DROP COLUMN line_seq;
        DROP INDEX wb_report_lines_line_key_idx;
        DROP FUNCTION report_line_key;
        """
    )
