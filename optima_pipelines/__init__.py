"""optima_pipelines: Optima's background work (WB syncs, the РНП mart, WB engines) as a Dagster code location."""

import warnings

# Installed here, before any module of ours defines an asset, so that no process (code server, run
# worker, CLI, demo) prints them. Dagster 1.13 itself passes `owners` when it binds a sensor's jobs,
# and warns about it on every load; nothing of ours uses owners. Two features we use on purpose and
# test: single-run backfills of the РНП (BackfillPolicy, beta) and partitioned asset checks on
# rnp_daily (preview).
for _message in (
    "Parameter `owners` of initializer",
    "Parameter `backfill_policy` of",
    "Specifying a partitions_def on an AssetCheckSpec",
):
    warnings.filterwarnings("ignore", message=_message)
