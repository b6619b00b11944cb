"""A local simulator of the Wildberries seller API, for tests and the demo. Never imported by production code."""
