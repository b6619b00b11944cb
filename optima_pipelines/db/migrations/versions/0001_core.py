"""Core tables: cabinets, the request outbox, per-(cabinet, feed) sync state.

Revision ID: 0001_core
Revises:
"""

from alembic import op

revision = "0001_core"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE cabinets (
            -- A cabinet id is also a Dagster dynamic partition key: no '|', ',', '[' or ']'.
            id                 text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
            name               text NOT NULL,
            -- 'active' is the original's «Активен»: the only status that schedules fan out over.
            status             text NOT NULL DEFAULT 'active'
                               CHECK (status IN ('active', 'paused', 'token_invalid', 'archived')),
            -- The WB token, Fernet-encrypted with OPTIMA_SECRET_KEY; never stored in clear.
            wb_token_encrypted bytea,
            token_updated_at   timestamptz,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now()
        );

        -- Work the backend asks for (the original's POST -> 202 + jobId). Sensors launch pending rows.
        -- No foreign key to cabinets: a request for an unknown cabinet must be accepted and then
        -- failed with a reason, not rejected by the insert.
        CREATE TABLE requests (
            id          bigserial PRIMARY KEY,
            kind        text NOT NULL,
            cabinet_id  text,
            payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
            status      text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
            run_id      text,
            error       text,
            result      jsonb,
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            started_at  timestamptz,
            finished_at timestamptz
        );
        CREATE INDEX requests_open_idx ON requests (kind, id) WHERE status IN ('pending', 'running');
        CREATE INDEX requests_cabinet_idx ON requests (cabinet_id, created_at);

        -- Per (cabinet, feed): where the change feed stands and when it may run again.
        CREATE TABLE sync_state (
            cabinet_id      text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            feed            text NOT NULL,
            cursor          jsonb,
            last_success_at timestamptz,
            last_run_id     text,
            resume_at       timestamptz,
            last_error      text,
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, feed)
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE sync_state; DROP TABLE requests; DROP TABLE cabinets;")
