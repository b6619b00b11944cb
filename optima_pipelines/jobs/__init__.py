"""Op jobs: work that is not an asset (the engines' runs, table upkeep), one module per domain."""
