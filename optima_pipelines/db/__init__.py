"""The warehouse database: URLs, the embedded server, connections and migrations."""

from optima_pipelines.db.connection import Connect, connect, transaction

__all__ = ["Connect", "connect", "transaction"]
