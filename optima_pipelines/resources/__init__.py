"""Dagster resources: thin, typed wrappers that assets and sensors take as parameters."""
