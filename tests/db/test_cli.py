"""The CLI as a user runs it: real PostgreSQL, one-line errors.

Most calls run in this process (tests/cli_runner.py: ``invoke_cli``, a real process's exit code,
stdout, stderr and environment, at a tenth of the time). These run a real process (``run_cli``),
because the process is what they check:

- test_cabinet_lifecycle_never_prints_the_token: the token never reaches the output of a real
  process, whose log handlers and redaction ``main()`` installs;
- test_an_expected_failure_is_one_line_from_a_real_process: ``python -m optima_pipelines.cli`` and
  the console script ``optima-pipelines`` themselves print one line and no traceback;
- test_every_command_has_help, for ``dagster`` only: it hands over to Dagster's CLI in a child process.
"""

import os

import pytest

from tests.cli_runner import invoke_cli, run_cli

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzIjozMjc2OCwic2lkIjoiY2xpIn0.c2ln"


def test_cabinet_lifecycle_never_prints_the_token(optima_env, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    added = run_cli("cabinets", "add", "c-1", "--name", "Cabinet 1", "--token-file", str(token_file))
    assert added.returncode == 0, added.stderr
    listed = run_cli("cabinets", "list")
    assert "c-1" in listed.stdout and "token set" in listed.stdout
    status = run_cli("cabinets", "set-status", "c-1", "paused")
    assert "now paused" in status.stdout
    for out in (added, listed, status):
        assert TOKEN not in out.stdout + out.stderr


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (("cabinets", "set-status", "ghost", "active"), {}, "error: cabinet 'ghost' does not exist"),
        (("cabinets", "set-status", "ghost", "sleeping"), {}, "error: invalid status 'sleeping'"),
        (
            ("db", "upgrade"),
            {"OPTIMA_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"},
            "error: cannot connect to PostgreSQL at 127.0.0.1:1/x",
        ),
        (
            ("db", "upgrade"),
            {"OPTIMA_DATABASE_URL": "mysql://u@h/db"},
            "error: OPTIMA_DATABASE_URL must be a postgresql:// URL",
        ),
        (("cabinets", "add", "bad|id"), {}, "error: invalid cabinet id 'bad|id'"),
        (
            ("cabinets", "add", "c2", "--token-env", "NOT_SET_ANYWHERE"),
            {},
            "error: environment variable NOT_SET_ANYWHERE is not set",
        ),
    ],
)
def test_expected_failures_are_one_line_without_traceback(optima_env, args, env, expected):
    result = invoke_cli(*args, env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(expected), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("entry", ["module", "script"])
def test_an_expected_failure_is_one_line_from_a_real_process(optima_env, entry):
    """What the in-process cases above show, by `python -m optima_pipelines.cli` and by the console
    script themselves: whatever their own start-up prints (logging, warnings) would be here."""
    result = run_cli("db", "upgrade", env={"OPTIMA_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"}, entry=entry)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: cannot connect to PostgreSQL at 127.0.0.1:1/x"), result.stderr
    assert "Traceback" not in result.stderr


def test_db_url_masks_the_password(optima_env):
    result = invoke_cli("db", "url", env={"OPTIMA_DATABASE_URL": "postgresql://app:hunter2@127.0.0.1:1/x"})
    assert result.returncode == 0
    assert "hunter2" not in result.stdout and "***" in result.stdout


def test_every_command_has_help(optima_env):
    from optima_pipelines.cli import cli

    def walk(group, path):
        yield path
        for name, cmd in getattr(group, "commands", {}).items():
            yield from walk(cmd, [*path, name])

    # In process (a process per command cost 14 s), except `dagster`, which hands over to Dagster's
    # own CLI in a process of its own.
    for path in walk(cli, []):
        ran = (run_cli if path == ["dagster"] else invoke_cli)(*path, "--help")
        output = ran.stdout + ran.stderr
        assert ran.returncode == 0, (path, output)
        assert "Usage:" in output, path


@pytest.mark.parametrize(
    "token",
    [
        "abc\r\nX-Evil: 1",
        TOKEN[:20] + " " + TOKEN[20:],
        TOKEN[:20] + "\x07" + TOKEN[20:],
        TOKEN + "é",
        "short",
        "x" * 8193,  # longer than any header a server takes: it was refused as "too short" before
    ],
)
def test_add_and_set_token_refuse_a_token_the_wb_client_would_refuse(optima_env, token):
    added = invoke_cli("cabinets", "add", "c-1", "--token-env", "BAD_TOKEN", env={"BAD_TOKEN": token})
    assert added.returncode == 1
    assert added.stderr.strip() == (
        "error: the WB token is not a WB API token (16 to 8,192 visible ASCII characters: no spaces, control or "
        "non-ASCII characters)"
    )
    assert invoke_cli("cabinets", "list").stdout.strip() == "no cabinets"
    assert invoke_cli("cabinets", "add", "c-1", "--token", TOKEN).returncode == 0
    replaced = invoke_cli("cabinets", "set-token", "c-1", "--token-env", "BAD_TOKEN", env={"BAD_TOKEN": token})
    assert replaced.returncode == 1 and replaced.stderr.startswith("error: the WB token is not a WB API token")


@pytest.mark.parametrize(
    "date_from, reason",
    [
        ("2026-13-45", "error: dateFrom '2026-13-45' is not a date (YYYY-MM-DD)"),
        ("2999-01-01", "error: dateFrom 2999-01-01 is in the future"),
        ("2020-01-01", "error: dateFrom 2020-01-01 is before WB's 90-day horizon"),
    ],
)
def test_import_feeds_refuses_a_bad_date_before_creating_a_request(optima_env, warehouse_conn, date_from, reason):
    assert invoke_cli("cabinets", "add", "c-1", "--token", TOKEN).returncode == 0
    result = invoke_cli("request", "import-feeds", "--cabinet", "c-1", "--date-from", date_from)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(reason), result.stderr
    assert warehouse_conn.execute("SELECT count(*) FROM requests").fetchone()[0] == 0


def test_health_of_a_never_migrated_environment_is_one_line_naming_the_fix(optima_env):
    result = invoke_cli("health", "--no-wb", env={"OPTIMA_ENV": "nevermigrated"})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: warehouse: this environment is not set up: schema optima_nevermigrated, dagster_nevermigrated "
        "does not exist; run `optima-pipelines db upgrade`"
    )


def test_a_binary_token_file_and_an_unreadable_cabinet_name_are_one_line_errors(optima_env, tmp_path):
    binary = tmp_path / "token.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01binary")
    result = invoke_cli("cabinets", "add", "c-1", "--token-file", str(binary))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: cannot read token file {binary}: it is not UTF-8 text"
    for name, reason in [("x" * 201, "is longer than 200 characters"), ("Shop\x1b[2J", "has control characters")]:
        named = invoke_cli("cabinets", "add", "c-1", "--name", name, "--token", TOKEN)
        assert named.returncode == 1 and named.stderr.startswith("error: the cabinet name "), named.stderr
        assert reason in named.stderr
    assert invoke_cli("cabinets", "list").stdout.strip() == "no cabinets"


def test_a_token_file_that_is_not_a_regular_file_is_refused_before_it_is_read(optima_env, tmp_path):
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a device or socket"), (str(fifo), "a FIFO"), (str(tmp_path), "a folder")):
        result = invoke_cli("cabinets", "add", "c-1", "--token-file", path)  # neither grows until OOM nor hangs
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.strip() == (
            f"error: token file {path} is {kind}, not a regular file: give the file that holds the token"
        )
    huge = tmp_path / "huge"
    huge.write_bytes(b"x" * (65 * 1024))
    result = invoke_cli("cabinets", "add", "c-1", "--token-file", str(huge))
    assert result.stderr.strip() == f"error: token file {huge} is larger than 64 KiB: it does not hold a token"
    # A token saved by a Windows editor starts with a BOM: it is dropped, and the token works.
    bom = tmp_path / "token.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + TOKEN.encode() + b"\r\n")
    added = invoke_cli("cabinets", "add", "c-1", "--token-file", str(bom))
    assert added.returncode == 0, added.stderr
    assert "token set" in invoke_cli("cabinets", "list").stdout


def test_set_token_under_another_key_is_refused_naming_the_key_in_use(optima_env, warehouse_conn):
    from cryptography.fernet import Fernet

    assert invoke_cli("cabinets", "add", "c-1", "--token", TOKEN).returncode == 0
    stored = warehouse_conn.execute("SELECT wb_token_encrypted FROM cabinets WHERE id = 'c-1'").fetchone()[0]
    wrong = Fernet.generate_key().decode()
    env = {"OPTIMA_SECRET_KEY": wrong}
    for args in (("cabinets", "set-token", "c-2", "--token", TOKEN), ("cabinets", "add", "c-2", "--token", TOKEN)):
        result = invoke_cli(*args, env=env)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith("error: the token key in use, OPTIMA_SECRET_KEY (fingerprint "), result.stderr
        assert "does not decrypt the stored token of cabinet 'c-1'" in result.stderr and wrong not in result.stderr
    assert warehouse_conn.execute("SELECT count(*) FROM cabinets").fetchone()[0] == 1
    # Replacing the one token the wrong key cannot read is what set-token is for: it is allowed.
    assert invoke_cli("cabinets", "set-token", "c-1", "--token", TOKEN, env=env).returncode == 0
    assert warehouse_conn.execute("SELECT wb_token_encrypted FROM cabinets WHERE id = 'c-1'").fetchone()[0] != stored


def test_a_full_disk_is_the_last_line_naming_where(optima_env, tmp_path):
    # The state folder's disk is full: writing DAGSTER_HOME's stamp of the packaged dagster.yaml fails
    # (/dev/full: ENOSPC).
    from optima_pipelines.operations.runtime import PACKAGED_STAMP

    home = tmp_path / "state" / "dagster" / optima_env
    home.mkdir(parents=True)
    (home / PACKAGED_STAMP).symlink_to("/dev/full")
    result = invoke_cli("cabinets", "list")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: no space left on device: cannot write in the state folder {tmp_path / 'state'}")
    ), result.stderr
