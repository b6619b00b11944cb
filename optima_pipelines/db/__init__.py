"""The warehouse database: URLs, the embedded server, connections and migrations."""

from optima_pipelines.db.connection import connect, transaction

__all__ = ["connect", "transaction"]
