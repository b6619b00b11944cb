"""The engines' shared audit trail: every action an engine takes on WB, with why and what WB answered.

Revision ID: 0005_engines
Revises: 0004_rnp

The engines (autobidder, repricer, slot booking, bulk pricing, review auto-replies) write one row
here per action on WB, so that a seller can see what was done to their cabinet. ``intent_id`` is
the engine's own idempotency key for a write (e.g. ``bid:<campaign>:<nm>:<minute>`` or
``answer:<feedback id>``): a write whose intent is already recorded as ``ok`` is never sent
again. Each engine's own tables (rules, tasks, results) come in their own migrations.
"""

from alembic import op

revision = "0005_engines"
down_revision = "0004_rnp"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE engine_actions (
            id bigserial PRIMARY KEY,
            cabinet_id text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            engine text NOT NULL,            -- autobidder | repricer | booking | pricing-bulk | autoreply
            action text NOT NULL,            -- set_bid | upload_prices | match_slot | answer_feedback | ...
            target text NOT NULL,            -- what was acted on: campaign:nm, nm id, feedback id, task id
            intent_id text,                  -- the engine's idempotency key for a WB write
            reason text NOT NULL,            -- why, in words a seller reads
            request jsonb NOT NULL DEFAULT '{}'::jsonb,   -- what was sent (never a token)
            response jsonb,                  -- what WB answered (or the error), NULL before the call
            status text NOT NULL CHECK (status IN ('pending', 'ok', 'failed')),
            run_id text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX engine_actions_cabinet_idx ON engine_actions (cabinet_id, engine, created_at DESC);
        CREATE UNIQUE INDEX engine_actions_intent_idx ON engine_actions (cabinet_id, engine, intent_id)
            WHERE intent_id IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE engine_actions")
