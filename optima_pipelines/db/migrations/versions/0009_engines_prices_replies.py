"""The price engines (repricer, bulk pricing) and review auto-replies: rules the backend writes, and what was done.

Revision ID: 0009_engines_prices_replies
Revises: 0008_engines_bids_slots

- ``repricer_rules``: one rule per (cabinet, product), written by the backend. A cabinet's rules
  with the same ``interval_hours`` run together every that many hours. Prices in rules are the
  price the buyer sees after the seller's discount ("selling price"), in whole rubles.
- ``repricer_outcomes``: what each run decided for each product it changed or skipped, and what
  WB did with it (one row per product and slot).
- ``pricing_bulk_items``: the items of a ``pricing-bulk`` request with their chunk and their result.
- ``price_upload_chunks``: every price upload task an engine sends, by intent id: recorded before
  the upload, with WB's task id once WB accepted it, so that a re-run checks a sent task at WB
  instead of uploading it again.
- ``autoreply_rules`` / ``autoreply_items`` / ``autoreply_complaints``: the cabinet's answer rules,
  every feedback and question seen with its state, and the complaints the rules asked for (WB's API
  has no complaint method: they are recorded intents for a person to file).

Every action on WB is also an ``engine_actions`` row (0005).
"""

from alembic import op

revision = "0009_engines_prices_replies"
down_revision = "0008_engines_bids_slots"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE repricer_rules (
            id              bigserial PRIMARY KEY,
            cabinet_id      text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            nm_id           bigint NOT NULL,
            interval_hours  integer NOT NULL DEFAULT 6 CHECK (interval_hours BETWEEN 1 AND 168),
            enabled         boolean NOT NULL DEFAULT true,
            -- Selling prices (after the seller's discount), whole rubles; NULL: not used.
            target_price    numeric CHECK (target_price > 0),
            min_price       numeric CHECK (min_price > 0),
            max_price       numeric CHECK (max_price > 0),
            cost            numeric CHECK (cost > 0),            -- the seller's cost of one unit
            min_margin_pct  numeric CHECK (min_margin_pct >= 0 AND min_margin_pct < 100),
            -- WB quarantines a cut to a third or less: a run never cuts more than this (<= 60 %).
            max_drop_pct    numeric NOT NULL DEFAULT 50 CHECK (max_drop_pct > 0 AND max_drop_pct <= 60),
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now(),
            UNIQUE (cabinet_id, nm_id),
            CHECK (min_price IS NULL OR max_price IS NULL OR min_price <= max_price),
            CHECK ((cost IS NULL) = (min_margin_pct IS NULL))
        );
        CREATE INDEX repricer_rules_due_idx ON repricer_rules (cabinet_id, interval_hours) WHERE enabled;

        CREATE TABLE repricer_outcomes (
            id            bigserial PRIMARY KEY,
            cabinet_id    text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            slot          text NOT NULL,         -- <interval>h:<slot start, UTC ISO>
            nm_id         bigint NOT NULL,
            rule_id       bigint,
            old_price     numeric,               -- WB's price before discount, when the run read it
            discount      integer,
            new_price     integer,               -- the price uploaded (before discount)
            old_selling   numeric,
            new_selling   numeric,
            chunk_no      integer,
            outcome       text NOT NULL
                          CHECK (outcome IN ('pending', 'applied', 'refused', 'skipped')),
            reason        text NOT NULL,         -- which rule moved the price, in words
            error         text,                  -- WB's error text for a refused item
            upload_id     bigint,
            run_id        text,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (cabinet_id, slot, nm_id)
        );
        CREATE INDEX repricer_outcomes_nm_idx ON repricer_outcomes (cabinet_id, nm_id, created_at DESC);

        CREATE TABLE pricing_bulk_items (
            request_id  bigint NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
            seq         integer NOT NULL,        -- position in the request's payload
            nm_id       bigint,
            price       integer,
            discount    integer,
            chunk_no    integer,                 -- NULL for an item refused before sending
            status      text NOT NULL CHECK (status IN ('pending', 'ok', 'failed', 'invalid')),
            error       text,
            upload_id   bigint,
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (request_id, seq)
        );
        CREATE INDEX pricing_bulk_items_chunk_idx ON pricing_bulk_items (request_id, chunk_no);

        CREATE TABLE price_upload_chunks (
            cabinet_id  text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            intent_id   text NOT NULL,           -- pricing-bulk:<request>:<chunk> | repricer:<cabinet>:<slot>:<chunk>
            engine      text NOT NULL,
            items       integer NOT NULL,
            state       text NOT NULL CHECK (state IN ('intent', 'sent', 'done', 'refused')),
            upload_id   bigint,                  -- WB's task id, once WB accepted the upload
            task_status integer,                 -- WB's final task status (3, 4, 5, 6)
            error       text,
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, intent_id)
        );

        CREATE TABLE autoreply_rules (
            id               bigserial PRIMARY KEY,
            cabinet_id       text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            name             text NOT NULL DEFAULT '',
            enabled          boolean NOT NULL DEFAULT true,
            priority         integer NOT NULL DEFAULT 100,   -- lower first; the first rule that matches wins
            applies_to       text NOT NULL DEFAULT 'feedback' CHECK (applies_to IN ('feedback', 'question', 'any')),
            min_rating       integer CHECK (min_rating BETWEEN 1 AND 5),   -- feedbacks only
            max_rating       integer CHECK (max_rating BETWEEN 1 AND 5),
            keywords         text[] NOT NULL DEFAULT '{}',   -- any of them in the text (case-insensitive)
            nm_ids           bigint[] NOT NULL DEFAULT '{}', -- only these products; empty: any
            answer_template  text,                           -- {name}, {product}; NULL: no answer
            complaint        boolean NOT NULL DEFAULT false,
            complaint_reason text,
            created_at       timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX autoreply_rules_cabinet_idx ON autoreply_rules (cabinet_id, priority, id) WHERE enabled;

        CREATE TABLE autoreply_items (
            cabinet_id   text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            item_id      text NOT NULL,          -- WB's feedback or question id
            kind         text NOT NULL CHECK (kind IN ('feedback', 'question')),
            nm_id        bigint,
            rating       integer,
            text         text NOT NULL DEFAULT '',
            author       text,
            product_name text,
            created_date timestamptz,
            state        text NOT NULL DEFAULT 'new' CHECK (state IN
                         ('new', 'no_rule', 'queued', 'sending', 'answered', 'answered_elsewhere', 'failed')),
            rule_id      bigint,
            answer_text  text,
            request_id   bigint,                 -- the autoreply-answer-send request that sends it
            error        text,
            answered_at  timestamptz,
            first_seen_at timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, item_id)
        );
        CREATE INDEX autoreply_items_open_idx ON autoreply_items (cabinet_id, state)
            WHERE state IN ('new', 'no_rule', 'queued', 'failed');

        CREATE TABLE autoreply_complaints (
            cabinet_id  text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            item_id     text NOT NULL,
            rule_id     bigint,
            reason      text NOT NULL,
            status      text NOT NULL DEFAULT 'recorded' CHECK (status IN ('recorded', 'filed', 'dismissed')),
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, item_id)
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE autoreply_complaints;
        DROP TABLE autoreply_items;
        DROP TABLE autoreply_rules;
        DROP TABLE price_upload_chunks;
        DROP TABLE pricing_bulk_items;
        DROP TABLE repricer_outcomes;
        DROP TABLE repricer_rules;
        """
    )
