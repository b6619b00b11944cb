"""One rule for what is retried: transient WB and database trouble only."""

from __future__ import annotations

import psycopg
import pytest
from dagster import Failure
from psycopg import errors as pg

from optima_pipelines.errors import DatabaseUnavailable, InvalidInput
from optima_pipelines.orchestration.retries import fail_on_permanent, is_transient
from optima_pipelines.wb import WbAuthError, WbUnavailable


@pytest.mark.parametrize(
    "exc",
    [
        pg.SerializationFailure("could not serialize access"),  # 40001
        pg.DeadlockDetected("deadlock detected"),  # 40P01
        pg.AdminShutdown("terminating connection due to administrator command"),  # 57P01
        pg.QueryCanceled("canceling statement due to statement timeout"),  # 57014
        pg.TooManyConnections("too many clients"),  # 53300
        pg.ConnectionFailure("connection failure"),  # 08006
        psycopg.OperationalError("server closed the connection unexpectedly"),  # no SQLSTATE
        DatabaseUnavailable("cannot connect to PostgreSQL at db:5432"),
        WbUnavailable(cabinet_id="c1", endpoint="GET x", attempts=6, last_error="HTTP 503"),
    ],
)
def test_transient_errors_are_left_to_the_retry_policy(exc):
    assert is_transient(exc)
    fail_on_permanent(exc, "sync")  # returns: the policy retries it


@pytest.mark.parametrize(
    "exc, cause",
    [
        (pg.NumericValueOutOfRange("integer out of range"), "NumericValueOutOfRange (SQLSTATE 22003)"),
        (pg.InvalidDatetimeFormat("invalid input syntax for type date"), "InvalidDatetimeFormat (SQLSTATE 22007)"),
        (pg.UniqueViolation("duplicate key value"), "UniqueViolation (SQLSTATE 23505)"),
        (pg.CheckViolation("violates check constraint"), "CheckViolation (SQLSTATE 23514)"),
        (pg.UndefinedColumn('column "x" does not exist'), "UndefinedColumn (SQLSTATE 42703)"),
        (pg.InsufficientPrivilege("permission denied"), "InsufficientPrivilege (SQLSTATE 42501)"),
        (WbAuthError(cabinet_id="c1", endpoint="GET x", status=401, detail="token expired"), "token expired"),
        (InvalidInput("dateFrom is in the future"), "dateFrom is in the future"),
    ],
)
def test_permanent_errors_fail_at_once_naming_the_cause(exc, cause):
    assert not is_transient(exc)
    with pytest.raises(Failure) as failure:
        fail_on_permanent(exc, "pricing-bulk request 7")
    assert failure.value.allow_retries is False
    assert failure.value.description.startswith("pricing-bulk request 7: ") and cause in failure.value.description
