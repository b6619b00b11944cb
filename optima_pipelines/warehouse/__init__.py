"""The warehouse's own tables, Dagster-free: cabinets (and their tokens' cipher), the request
outbox, the monthly table partitions."""
