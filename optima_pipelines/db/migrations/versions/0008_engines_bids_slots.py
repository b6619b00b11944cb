"""The autobidder's rules, the slot-booking tasks and the A/B tests: tables the backend writes, and the engines' own.

Revision ID: 0008_engines_bids_slots
Revises: 0007_syncs

Written by the backend (a seller's settings):
- ``autobidder_rules``: one rule per (campaign, product, placement): a target CPO (rubles per ad
  order) or ДРР (ad spend as % of ad order value), the bid bounds in kopecks, the largest step,
  the dead band, the look-back in days of statistics, an optional daily budget, and the least
  time between two changes of a bid.
- ``booking_tasks``: warehouses, a date range, the highest acceptance coefficient the seller
  accepts (0: free acceptance only) and the box type (NULL: any).
- ``ab_tests`` and ``ab_test_variants``: a product and its variants, each with the period (Moscow
  days) it ran.

Written by the engines:
- ``autobidder_state``: per rule, the last bid set and the statistics it was decided on (a rule
  acts once per new statistics, never twice on the same numbers), and WB's minimum bid.
- ``booking_matches``: the slot a task was matched with; ``task_id`` is unique, so a task is
  matched once whatever the number of concurrent monitors. ``booking_monitor_state``: the last poll
  of WB's coefficients and its error (the method may be switched off).
- ``ab_test_results``: the metrics of each variant, recomputed in place.

Every action on WB goes to ``engine_actions`` (0005_engines).
"""

from alembic import op

revision = "0008_engines_bids_slots"
down_revision = "0007_syncs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE autobidder_rules (
            id                 bigserial PRIMARY KEY,
            cabinet_id         text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            advert_id          bigint NOT NULL,
            nm_id              bigint NOT NULL,
            -- combined for unified-bid campaigns, search or recommendations for manual ones
            placement          text NOT NULL DEFAULT 'combined'
                               CHECK (placement IN ('combined', 'search', 'recommendations')),
            strategy           text NOT NULL CHECK (strategy IN ('target_cpo', 'target_drr')),
            target             numeric NOT NULL CHECK (target > 0),   -- rubles (CPO) or percent (ДРР)
            min_bid_kopecks    integer NOT NULL CHECK (min_bid_kopecks > 0),
            max_bid_kopecks    integer NOT NULL,
            max_step_percent   numeric NOT NULL DEFAULT 20 CHECK (max_step_percent > 0 AND max_step_percent <= 100),
            tolerance_percent  numeric NOT NULL DEFAULT 5 CHECK (tolerance_percent >= 0 AND tolerance_percent < 100),
            lookback_days      integer NOT NULL DEFAULT 3 CHECK (lookback_days BETWEEN 1 AND 14),
            daily_budget_rub   numeric CHECK (daily_budget_rub > 0),     -- NULL: no budget cap on raising
            -- a bid is changed at most once in this many minutes (its effect needs time to show)
            min_change_interval_minutes integer NOT NULL DEFAULT 60 CHECK (min_change_interval_minutes >= 0),
            enabled            boolean NOT NULL DEFAULT true,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now(),
            CHECK (max_bid_kopecks >= min_bid_kopecks),
            UNIQUE (cabinet_id, advert_id, nm_id, placement)
        );
        CREATE INDEX autobidder_rules_enabled_idx ON autobidder_rules (cabinet_id) WHERE enabled;

        CREATE TABLE autobidder_state (
            rule_id            bigint PRIMARY KEY REFERENCES autobidder_rules (id) ON DELETE CASCADE,
            bid_kopecks        integer,          -- the last bid WB confirmed
            set_at             timestamptz,
            stats_loaded_at    timestamptz,      -- the newest statistics row the last decision used
            decided_at         timestamptz,
            decision           text,             -- the last decision, in words
            wb_min_bid_kopecks integer,
            wb_min_checked_at  timestamptz,
            last_error         text
        );

        CREATE TABLE booking_tasks (
            id               bigserial PRIMARY KEY,
            cabinet_id       text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            warehouse_ids    bigint[] NOT NULL CHECK (cardinality(warehouse_ids) > 0),
            date_from        date NOT NULL,
            date_to          date NOT NULL,
            max_coefficient  numeric NOT NULL DEFAULT 0,   -- 0: free acceptance only
            box_type_id      integer,                      -- 2 boxes, 5 monopallets, 6 supersafe; NULL: any
            status           text NOT NULL DEFAULT 'open'
                             CHECK (status IN ('open', 'matched', 'cancelled', 'expired')),
            created_at       timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now(),
            matched_at       timestamptz,
            last_checked_at  timestamptz,
            last_error       text,
            CHECK (date_to >= date_from)
        );
        CREATE INDEX booking_tasks_open_idx ON booking_tasks (cabinet_id) WHERE status = 'open';

        CREATE TABLE booking_matches (
            id               bigserial PRIMARY KEY,
            task_id          bigint NOT NULL UNIQUE REFERENCES booking_tasks (id) ON DELETE CASCADE,
            cabinet_id       text NOT NULL,
            warehouse_id     bigint NOT NULL,
            warehouse_name   text,
            slot_date        date NOT NULL,
            box_type_id      integer,
            coefficient      numeric NOT NULL,
            polled_with      text,              -- the cabinet whose token read the coefficients
            matched_at       timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE booking_monitor_state (
            id                  boolean PRIMARY KEY DEFAULT true CHECK (id),
            last_poll_at        timestamptz,
            last_ok_at          timestamptz,
            last_error          text,
            consecutive_errors  integer NOT NULL DEFAULT 0,
            last_cabinet_id     text
        );
        INSERT INTO booking_monitor_state (id) VALUES (true);

        CREATE TABLE ab_tests (
            id          bigserial PRIMARY KEY,
            cabinet_id  text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            nm_id       bigint NOT NULL,
            name        text NOT NULL,
            status      text NOT NULL DEFAULT 'running' CHECK (status IN ('draft', 'running', 'finished')),
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE ab_test_variants (
            id          bigserial PRIMARY KEY,
            test_id     bigint NOT NULL REFERENCES ab_tests (id) ON DELETE CASCADE,
            name        text NOT NULL,                 -- "A", "B", "new main photo"...
            date_from   date NOT NULL,                 -- Moscow days, inclusive
            date_to     date NOT NULL,
            UNIQUE (test_id, name),
            CHECK (date_to >= date_from)
        );
        CREATE TABLE ab_test_results (
            test_id                   bigint NOT NULL REFERENCES ab_tests (id) ON DELETE CASCADE,
            variant_id                bigint NOT NULL REFERENCES ab_test_variants (id) ON DELETE CASCADE,
            cabinet_id                text NOT NULL,
            nm_id                     bigint NOT NULL,
            date_from                 date NOT NULL,
            date_to                   date NOT NULL,
            days                      integer NOT NULL,      -- days of the period up to today
            days_with_data            integer NOT NULL,      -- of those, days with ad or funnel rows
            views                     bigint NOT NULL,
            clicks                    bigint NOT NULL,
            ctr                       numeric,               -- clicks / views, %
            ad_spend                  numeric NOT NULL,      -- rubles
            ad_orders                 bigint NOT NULL,
            cpc                       numeric,               -- rubles per click
            cpo                       numeric,               -- rubles per ad order
            card_opens                bigint NOT NULL,
            add_to_cart               bigint NOT NULL,
            orders                    bigint NOT NULL,
            order_sum                 numeric NOT NULL,
            buyouts                   bigint NOT NULL,
            add_to_cart_conversion    numeric,               -- add_to_cart / card_opens, %
            cart_to_order_conversion  numeric,               -- orders / add_to_cart, %
            open_to_order_conversion  numeric,               -- orders / card_opens, %
            orders_per_day            numeric,
            computed_at               timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (test_id, variant_id)
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE ab_test_results;
        DROP TABLE ab_test_variants;
        DROP TABLE ab_tests;
        DROP TABLE booking_monitor_state;
        DROP TABLE booking_matches;
        DROP TABLE booking_tasks;
        DROP TABLE autobidder_state;
        DROP TABLE autobidder_rules;
        """
    )
