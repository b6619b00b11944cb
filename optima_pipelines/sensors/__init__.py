"""Sensors: thin shells around pure decision functions that unit tests call directly."""
