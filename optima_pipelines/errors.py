"""Errors with a message meant for a person: the CLI prints them as one line, never a traceback."""

from __future__ import annotations


class OptimaError(Exception):
    """Base class for expected failures whose message names what was wrong."""


class ConfigError(OptimaError):
    """A setting (environment variable, URL, option) has a bad value."""


class DatabaseUnavailable(OptimaError):
    """The PostgreSQL server cannot be reached or refused the connection."""


class UnknownCabinet(OptimaError):
    """A cabinet id that is not in the cabinets table."""

    def __init__(self, cabinet_id: str):
        super().__init__(f"cabinet {cabinet_id!r} does not exist")
        self.cabinet_id = cabinet_id


class InvalidInput(OptimaError):
    """A request, file or argument that cannot be accepted as given."""
