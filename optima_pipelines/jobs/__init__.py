"""Op jobs: work that is not an asset (table upkeep), one module per domain."""
