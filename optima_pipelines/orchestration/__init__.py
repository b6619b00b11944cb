"""How work is run: the original queues, every cadence, the fan-out over cabinets, the run
coordinator, the run config of the cabinet jobs, the retry rule, what a sync run records (its
materializations), and the Dagster internals they need. No domain logic lives here."""
