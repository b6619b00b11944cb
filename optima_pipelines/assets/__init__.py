"""Assets: one module per domain (digitization, finance, ads, funnel, catalog, inventory, news, rnp, ...)."""
