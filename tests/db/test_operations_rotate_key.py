"""Tokens at rest: a dump of the database shows none, and rotate-key never leaves one unreadable.

The commands run in this process (tests/cli_runner.py: ``invoke_cli``), except the rotation of
test_rotate_key_with_the_state_folder_key, a real process (``run_cli``): neither key reaches the
output of a real process, with the log handlers ``main()`` installs.
"""

import psycopg
import pytest
from cryptography.fernet import Fernet

from optima_pipelines.warehouse import cabinets
from optima_pipelines.warehouse.secrets import KEY_FILE, TokenCipher
from tests.cli_runner import invoke_cli, run_cli

TOKENS = {
    "shop-1": "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJzaG9wLTEifQ.c2lnbmF0dXJlMQ",
    "shop-2": "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJzaG9wLTIifQ.c2lnbmF0dXJlMg",
}


def dump(conn: psycopg.Connection) -> str:
    """What pg_dump would write for the table: COPY of every row, bytea included."""
    with conn.cursor().copy("COPY cabinets TO STDOUT") as copy:
        return b"".join(bytes(block) for block in copy).decode()


def tokens_under(conn: psycopg.Connection, key: bytes) -> dict[str, str]:
    cipher = TokenCipher(key)
    return {c.id: cabinets.get_token(conn, cipher, c.id) for c in cabinets.list_cabinets(conn)}


@pytest.fixture
def key_file_env(optima_env, monkeypatch, settings):
    """The embedded default: no OPTIMA_SECRET_KEY, the key generated into the state folder."""
    monkeypatch.delenv("OPTIMA_SECRET_KEY")
    for cabinet_id, token in TOKENS.items():
        added = invoke_cli("cabinets", "add", cabinet_id, "--token-env", "T", env={"T": token})
        assert added.returncode == 0, added.stderr
    return settings.state_dir / KEY_FILE


def test_rotate_key_with_the_state_folder_key(key_file_env, warehouse_conn):
    old = key_file_env.read_bytes().strip()
    before = dump(warehouse_conn)
    assert not any(token in before for token in TOKENS.values())

    rotated = run_cli("cabinets", "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    assert "re-encrypted 2 tokens" in rotated.stdout

    new = key_file_env.read_bytes().strip()
    assert new != old and len(new.split()) == 1
    assert oct(key_file_env.stat().st_mode & 0o777) == "0o600"
    assert tokens_under(warehouse_conn, new) == TOKENS
    with pytest.raises(Exception, match="cannot be decrypted"):
        tokens_under(warehouse_conn, old)
    after = dump(warehouse_conn)
    assert after != before and not any(token in after for token in TOKENS.values())
    for out in (rotated.stdout, rotated.stderr):
        assert new.decode() not in out and old.decode() not in out


def test_an_interrupted_rotation_is_readable_throughout_and_finishes_on_rerun(key_file_env, warehouse_conn):
    # The command writes NEW,OLD to the key file before its transaction: simulate dying right after.
    old = key_file_env.read_bytes().strip()
    pending = Fernet.generate_key()
    key_file_env.write_bytes(pending + b"\n" + old + b"\n")
    assert tokens_under(warehouse_conn, key_file_env.read_bytes()) == TOKENS

    finished = invoke_cli("cabinets", "rotate-key")
    assert finished.returncode == 0, finished.stderr
    assert key_file_env.read_bytes().strip() == pending
    assert tokens_under(warehouse_conn, pending) == TOKENS


def test_a_given_new_key_is_used(key_file_env, warehouse_conn, tmp_path):
    given = Fernet.generate_key()
    (tmp_path / "new.key").write_bytes(given)
    rotated = invoke_cli("cabinets", "rotate-key", "--new-key-file", str(tmp_path / "new.key"))
    assert rotated.returncode == 0, rotated.stderr
    assert tokens_under(warehouse_conn, given) == TOKENS


def test_an_unreadable_token_stops_the_rotation_and_names_its_cabinet(key_file_env, warehouse_conn):
    warehouse_conn.execute(
        "UPDATE cabinets SET wb_token_encrypted = %s WHERE id = 'shop-2'",
        (Fernet(Fernet.generate_key()).encrypt(b"foreign"),),
    )
    rotated = invoke_cli("cabinets", "rotate-key")
    assert rotated.returncode == 1
    assert rotated.stderr.startswith("error: cabinet 'shop-2': a stored WB token cannot be decrypted")
    # Nothing changed in the database, and the key file still reads every token it read before.
    assert cabinets.get_token(warehouse_conn, TokenCipher(key_file_env.read_bytes()), "shop-1") == TOKENS["shop-1"]


def test_rotate_key_with_the_environment_key_takes_new_then_old(optima_env, warehouse_conn, secret_key):
    for cabinet_id, token in TOKENS.items():
        assert invoke_cli("cabinets", "add", cabinet_id, "--token-env", "T", env={"T": token}).returncode == 0

    refused = invoke_cli("cabinets", "rotate-key")
    assert refused.returncode == 1
    assert "OPTIMA_SECRET_KEY holds one key: set OPTIMA_SECRET_KEY=NEW,OLD on every process" in refused.stderr

    new = Fernet.generate_key().decode()
    # Until the rotation runs, every process with NEW,OLD reads every token.
    assert tokens_under(warehouse_conn, f"{new},{secret_key}".encode()) == TOKENS
    rotated = invoke_cli("cabinets", "rotate-key", env={"OPTIMA_SECRET_KEY": f"{new},{secret_key}"})
    assert rotated.returncode == 0, rotated.stderr
    assert "re-encrypted 2 tokens" in rotated.stdout
    assert tokens_under(warehouse_conn, new.encode()) == TOKENS


def test_new_key_prints_a_usable_key(optima_env):
    printed = invoke_cli("cabinets", "new-key")
    assert printed.returncode == 0
    Fernet(printed.stdout.strip().encode())
