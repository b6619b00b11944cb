"""Log lines carry the run id and cabinet they belong to, and a WB token never survives into one."""

import io
import logging

import pytest

from optima_pipelines import logs

TOKEN = "eyJhbGciOiJFUzI1NiIsImtpZCI6IjIwMjUwMSJ9.eyJlbnQiOjEsImV4cCI6MTc5OTk5OTk5OSwic2lkIjoiYWJjIn0.c2lnbmF0dXJlX19f"


@pytest.fixture
def captured():
    """The optima_pipelines logger's own line format, written to a buffer."""
    logs.install()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(logs.LINE_FORMAT))
    logger = logging.getLogger("optima_pipelines.test_operations_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield logger, stream
    logger.removeHandler(handler)


def test_lines_carry_the_bound_run_and_cabinet(captured):
    logger, stream = captured
    with logs.bind(run_id="run-123", cabinet="shop-7"):
        logger.info("synced %d rows", 5)
    logger.info("outside any run")
    first, second = stream.getvalue().splitlines()
    assert "run_id=run-123 cabinet=shop-7 synced 5 rows" in first
    assert "run_id=- cabinet=- outside any run" in second


def test_nested_binding_for_a_run_that_serves_several_cabinets(captured):
    logger, stream = captured
    with logs.bind(run_id="run-9"):
        for cabinet in ("a", "b"):
            with logs.bind(cabinet=cabinet):
                logger.info("cabinet done")
    assert [line.split(" run_id=")[1] for line in stream.getvalue().splitlines()] == [
        "run-9 cabinet=a cabinet done",
        "run-9 cabinet=b cabinet done",
    ]


def test_a_token_is_masked_in_message_arguments_and_traceback(captured):
    logger, stream = captured
    logger.info(f"token in the message {TOKEN}")
    logger.warning("token in an argument %s and a dict %s", TOKEN, {"Authorization": f"Bearer {TOKEN}"})
    try:
        raise RuntimeError(f"WB said no to {TOKEN}")
    except RuntimeError:
        logger.exception("request failed")
    out = stream.getvalue()
    assert TOKEN not in out
    assert TOKEN.split(".")[1] not in out  # not even the payload part
    assert out.count(logs.MASK) == 4
    assert "RuntimeError: WB said no to <redacted>" in out


def test_a_registered_secret_that_is_no_jwt_is_masked_too(captured):
    logger, stream = captured
    opaque = "plain-opaque-token-0123456789"
    logs.register_secret(opaque)
    logger.error("bad %s", opaque)
    assert opaque not in stream.getvalue()
    assert "bad <redacted>" in stream.getvalue()


def test_records_of_other_libraries_are_redacted_as_well(caplog):
    logs.install()
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info("GET https://example.invalid/?t=%s", TOKEN)
    assert TOKEN not in caplog.text and "<redacted>" in caplog.text
