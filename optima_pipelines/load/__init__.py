"""Loading into the warehouse: stage rows with COPY, merge them by natural key, in the caller's transaction."""

from optima_pipelines.load.merge import MergeResult, merge_rows

__all__ = ["MergeResult", "merge_rows"]
