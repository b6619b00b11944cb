"""Operations: what tells people how the deployment is doing, and what keeps it tidy.

- ``records``: ``record_feed_sync`` / ``record_reaggregation``, called by syncs and re-aggregations
  when they finish (the figures behind /metrics);
- ``metrics`` + ``server``: the ``/metrics`` and ``/health`` process (``optima-pipelines metrics``);
- ``health``: the checks behind ``optima-pipelines health`` and ``/health``;
- ``webserver``: the Dagster UI behind HTTP basic auth;
- ``daemon``: ``dagster-daemon`` with its sensor loop every second;
- ``processes``: the processes ``dev`` supervises and production runs as services;
- ``retention``: the nightly ``prune_runs`` job.
"""
