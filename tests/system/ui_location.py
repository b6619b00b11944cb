"""The production definitions plus two tiny partitioned assets, for the browser test (never in production).

``ui_feed`` → ``ui_mart`` stand in for a WB feed and the РНП mart: both cabinet × Moscow day, like
the real ones, so the UI's lineage, partition grid and backfill dialog are the ones production shows.
"""

from dagster import AssetExecutionContext, Definitions, MaterializeResult, asset

from optima_pipelines import definitions
from optima_pipelines.partitions import CABINET_DAY


@asset(partitions_def=CABINET_DAY, group_name="ui_test")
def ui_feed(context: AssetExecutionContext) -> MaterializeResult:
    """Stand-in for a WB feed (cabinet × Moscow day)."""
    return MaterializeResult(metadata={"partition": context.partition_key})


@asset(partitions_def=CABINET_DAY, group_name="ui_test", deps=[ui_feed])
def ui_mart(context: AssetExecutionContext) -> MaterializeResult:
    """Stand-in for rnp_daily (cabinet × Moscow day), downstream of the feed."""
    return MaterializeResult(metadata={"partition": context.partition_key})


defs = Definitions.merge(definitions.defs, Definitions(assets=[ui_feed, ui_mart]))
