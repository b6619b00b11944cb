"""The WB feed tables: orders, sales and returns, the finance report, ads, the funnel, catalog, prices, stocks, news.

Revision ID: 0003_feeds
Revises: 0002_wb_client

Conventions: one row per WB natural key, scoped by cabinet; WB's column names in snake_case; WB
timestamps (Moscow wall time when WB gives no zone) stored as timestamptz; the business day
``day`` is the Moscow date the row belongs to; money is ``numeric`` (never float); ``loaded_at`` /
``run_id`` say which load last wrote the row.
"""

from alembic import op

revision = "0003_feeds"
down_revision = "0002_wb_client"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- GET statistics-api /api/v1/supplier/orders: one row per order (srid), updated as it changes.
        CREATE TABLE wb_orders (
            cabinet_id         text NOT NULL,
            srid               text NOT NULL,
            day                date NOT NULL,            -- Moscow date of "date"
            date               timestamptz NOT NULL,
            last_change_date   timestamptz NOT NULL,
            g_number           text,
            warehouse_name     text,
            warehouse_type     text,
            country_name       text,
            oblast_okrug_name  text,
            region_name        text,
            supplier_article   text,
            nm_id              bigint NOT NULL,
            barcode            text,
            category           text,
            subject            text,
            brand              text,
            tech_size          text,
            income_id          bigint,
            is_supply          boolean,
            is_realization     boolean,
            total_price        numeric NOT NULL,
            discount_percent   integer,
            spp                numeric,
            finished_price     numeric,
            price_with_disc    numeric,
            is_cancel          boolean NOT NULL DEFAULT false,
            cancel_date        timestamptz,              -- NULL where WB says 0001-01-01
            sticker            text,
            loaded_at          timestamptz NOT NULL DEFAULT now(),
            run_id             text,
            PRIMARY KEY (cabinet_id, srid)
        );
        CREATE INDEX wb_orders_day_idx ON wb_orders (cabinet_id, day);

        -- GET statistics-api /api/v1/supplier/sales: sales (saleID S...) and returns (R...).
        -- Keyed by saleID, never srid: a return shares its sale's srid and would overwrite it.
        CREATE TABLE wb_sales (
            cabinet_id          text NOT NULL,
            sale_id             text NOT NULL,
            srid                text NOT NULL,
            day                 date NOT NULL,           -- Moscow date of "date"
            date                timestamptz NOT NULL,
            last_change_date    timestamptz NOT NULL,
            is_return           boolean NOT NULL,        -- saleID starts with R
            g_number            text,
            warehouse_name      text,
            warehouse_type      text,
            country_name        text,
            oblast_okrug_name   text,
            region_name         text,
            supplier_article    text,
            nm_id               bigint NOT NULL,
            barcode             text,
            category            text,
            subject             text,
            brand               text,
            tech_size           text,
            income_id           bigint,
            is_supply           boolean,
            is_realization      boolean,
            total_price         numeric,
            discount_percent    integer,
            spp                 numeric,
            payment_sale_amount numeric,
            for_pay             numeric,
            finished_price      numeric,
            price_with_disc     numeric,
            sticker             text,
            loaded_at           timestamptz NOT NULL DEFAULT now(),
            run_id              text,
            PRIMARY KEY (cabinet_id, sale_id)
        );
        CREATE INDEX wb_sales_day_idx ON wb_sales (cabinet_id, day);
        CREATE INDEX wb_sales_srid_idx ON wb_sales (cabinet_id, srid);

        -- POST finance-api /api/finance/v1/sales-reports/detailed (and user-uploaded reports):
        -- one row per report line (rrdId). Money arrives as strings and is stored as numeric.
        CREATE TABLE wb_report_lines (
            cabinet_id                      text NOT NULL,
            rrd_id                          bigint NOT NULL,
            day                             date NOT NULL,   -- the line's own Moscow date (rrDate)
            report_id                       bigint,
            date_from                       date,
            date_to                         date,
            create_date                     date,
            currency                        text,
            report_type                     integer,
            gi_id                           bigint,
            subject_name                    text,
            nm_id                           bigint,          -- 0 on lines not tied to a product
            brand_name                      text,
            vendor_code                     text,
            title                           text,
            tech_size                       text,
            sku                             text,
            doc_type_name                   text,
            seller_oper_name                text,
            quantity                        integer,
            retail_price                    numeric,
            retail_amount                   numeric,
            sale_percent                    numeric,
            commission_percent              numeric,
            office_name                     text,
            order_dt                        timestamptz,
            sale_dt                         timestamptz,
            rr_date                         date,
            shk_id                          bigint,
            retail_price_with_disc          numeric,
            delivery_amount                 integer,
            return_amount                   integer,
            delivery_service                numeric,         -- logistics
            gi_box_type_name                text,
            product_discount_for_report     numeric,
            seller_promo                    numeric,
            spp                             numeric,
            kvw_base                        numeric,
            kvw                             numeric,
            sup_rating_up                   numeric,
            is_kgvp_v2                      numeric,
            ppvz_sales_commission           numeric,
            for_pay                         numeric,         -- payout to the seller
            ppvz_reward                     numeric,
            acquiring_fee                   numeric,
            acquiring_percent               numeric,
            payment_processing              text,
            acquiring_bank                  text,
            vw                              numeric,         -- WB's commission
            vw_nds                          numeric,
            ppvz_office_name                text,
            ppvz_office_id                  bigint,
            ppvz_supplier_name              text,
            ppvz_supplier_inn               text,
            declaration_number              text,
            bonus_type_name                 text,
            sticker_id                      text,
            country                         text,
            srv_dbs                         boolean,
            penalty                         numeric,
            additional_payment              numeric,
            rebill_logistic_cost            numeric,
            rebill_logistic_org             text,
            paid_storage                    numeric,
            deduction                       numeric,
            paid_acceptance                 numeric,
            order_id                        bigint,
            kiz                             text,
            is_b2b                          boolean,
            trbx_id                         text,
            installment_cofinancing_amount  numeric,
            wibes_discount_percent          numeric,
            cashback_amount                 numeric,
            cashback_discount               numeric,
            cashback_commission_change      numeric,
            payment_schedule                numeric,
            delivery_method                 text,
            order_uid                       text,
            srid                            text,
            source                          text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'user_report')),
            request_id                      bigint,          -- the import request that wrote it
            loaded_at                       timestamptz NOT NULL DEFAULT now(),
            run_id                          text,
            PRIMARY KEY (cabinet_id, rrd_id)
        );
        CREATE INDEX wb_report_lines_day_idx ON wb_report_lines (cabinet_id, day);
        CREATE INDEX wb_report_lines_srid_idx ON wb_report_lines (cabinet_id, srid);

        -- Ad campaigns (GET /api/advert/v2/adverts), their products and current bids (kopecks).
        CREATE TABLE ad_campaigns (
            cabinet_id    text NOT NULL,
            advert_id     bigint NOT NULL,
            name          text,
            status        integer NOT NULL,
            bid_type      text,
            payment_type  text,
            currency      text,
            created_at    timestamptz,
            updated_at    timestamptz,
            started_at    timestamptz,
            synced_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, advert_id)
        );
        CREATE TABLE ad_campaign_products (
            cabinet_id                   text NOT NULL,
            advert_id                    bigint NOT NULL,
            nm_id                        bigint NOT NULL,
            subject_id                   bigint,
            subject_name                 text,
            bid_search_kopecks           bigint,
            bid_recommendations_kopecks  bigint,
            synced_at                    timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, advert_id, nm_id)
        );

        -- GET /adv/v3/fullstats, per campaign, day, app and product. "Associated" products (shown
        -- by WB but not in the campaign) are kept and flagged.
        CREATE TABLE ad_campaign_stats (
            cabinet_id     text NOT NULL,
            advert_id      bigint NOT NULL,
            day            date NOT NULL,
            app_type       integer NOT NULL,                 -- 1 site, 32 Android, 64 iOS
            nm_id          bigint NOT NULL,
            is_associated  boolean NOT NULL DEFAULT false,
            views          bigint NOT NULL DEFAULT 0,
            clicks         bigint NOT NULL DEFAULT 0,
            atbs           bigint NOT NULL DEFAULT 0,        -- add-to-basket
            orders         bigint NOT NULL DEFAULT 0,
            shks           bigint NOT NULL DEFAULT 0,        -- items ordered
            canceled       bigint NOT NULL DEFAULT 0,
            sum            numeric NOT NULL DEFAULT 0,       -- spend, rubles
            sum_price      numeric NOT NULL DEFAULT 0,       -- value of ad orders, rubles
            loaded_at      timestamptz NOT NULL DEFAULT now(),
            run_id         text,
            PRIMARY KEY (cabinet_id, advert_id, day, app_type, nm_id)
        );
        CREATE INDEX ad_campaign_stats_day_idx ON ad_campaign_stats (cabinet_id, day);

        -- Sales funnel per product and day (POST /api/analytics/v3/sales-funnel/products/history).
        -- WB only serves the last days: this table is the history.
        CREATE TABLE rnp_funnel_stats (
            cabinet_id               text NOT NULL,
            day                      date NOT NULL,
            nm_id                    bigint NOT NULL,
            open_count               bigint NOT NULL DEFAULT 0,
            cart_count               bigint NOT NULL DEFAULT 0,
            order_count              bigint NOT NULL DEFAULT 0,
            order_sum                numeric NOT NULL DEFAULT 0,
            buyout_count             bigint NOT NULL DEFAULT 0,
            buyout_sum               numeric NOT NULL DEFAULT 0,
            buyout_percent           numeric,
            add_to_cart_conversion   numeric,
            cart_to_order_conversion numeric,
            add_to_wishlist_count    bigint,
            loaded_at                timestamptz NOT NULL DEFAULT now(),
            run_id                   text,
            PRIMARY KEY (cabinet_id, day, nm_id)
        );

        -- Product cards (POST content-api /content/v2/get/cards/list).
        CREATE TABLE products (
            cabinet_id    text NOT NULL,
            nm_id         bigint NOT NULL,
            imt_id        bigint,
            vendor_code   text,
            brand         text,
            subject_id    bigint,
            subject_name  text,
            title         text,
            sizes         jsonb NOT NULL DEFAULT '[]'::jsonb,   -- [{chrtID, techSize, skus}]
            wb_updated_at timestamptz,
            synced_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, nm_id)
        );

        -- Current prices (GET discounts-prices-api /api/v2/list/goods/filter) and their history.
        CREATE TABLE prices (
            cabinet_id     text NOT NULL,
            nm_id          bigint NOT NULL,
            vendor_code    text,
            price          numeric NOT NULL,      -- before the seller's discount
            discount       integer NOT NULL,      -- seller's discount, %
            club_discount  integer,
            currency       text,
            sizes          jsonb NOT NULL DEFAULT '[]'::jsonb,
            synced_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, nm_id)
        );
        CREATE TABLE price_history (
            cabinet_id     text NOT NULL,
            nm_id          bigint NOT NULL,
            valid_from     timestamptz NOT NULL,
            price          numeric NOT NULL,
            discount       integer NOT NULL,
            club_discount  integer,
            PRIMARY KEY (cabinet_id, nm_id, valid_from)
        );

        -- Stocks on WB warehouses (POST /api/analytics/v1/stocks-report/wb-warehouses). WB keeps no
        -- history: each Moscow day keeps its last snapshot.
        CREATE TABLE stocks (
            cabinet_id          text NOT NULL,
            day                 date NOT NULL,
            nm_id               bigint NOT NULL,
            chrt_id             bigint NOT NULL,
            warehouse_id        bigint NOT NULL,
            warehouse_name      text,
            region_name         text,
            quantity            bigint NOT NULL DEFAULT 0,
            in_way_to_client    bigint NOT NULL DEFAULT 0,
            in_way_from_client  bigint NOT NULL DEFAULT 0,
            snapshot_at         timestamptz NOT NULL,
            run_id              text,
            PRIMARY KEY (cabinet_id, day, nm_id, chrt_id, warehouse_id)
        );

        -- WB news (GET common-api /api/communications/v2/news) for the knowledge base. Not per cabinet.
        CREATE TABLE kb_articles (
            news_id       bigint PRIMARY KEY,
            header        text NOT NULL,
            content       text NOT NULL,
            published_at  timestamptz NOT NULL,
            types         jsonb NOT NULL DEFAULT '[]'::jsonb,
            synced_at     timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TABLE kb_articles, stocks, price_history, prices, products, rnp_funnel_stats, "
        "ad_campaign_stats, ad_campaign_products, ad_campaigns, wb_report_lines, wb_sales, wb_orders"
    )
