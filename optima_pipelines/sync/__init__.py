"""Sync logic per domain, free of Dagster: fetch from WB through the client, merge into the warehouse.

Assets, ops and sensors are thin shells around these functions, and tests call them directly.
"""
