"""optima_pipelines: Optima's background work (WB syncs, the РНП mart, WB engines) as a Dagster code location."""
