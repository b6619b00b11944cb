"""`optima-pipelines cabinets ...`: register cabinets, list them, change their status."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import click
from cryptography.fernet import Fernet

from optima_pipelines.errors import InvalidInput
from optima_pipelines.operations.runtime import open_deployment
from optima_pipelines.settings import load_settings
from optima_pipelines.warehouse import cabinets as repo
from optima_pipelines.warehouse.secrets import KEY_FILE, TokenCipher, key_source, load_key, split_keys, write_key_file


def _read_token(token: str | None, token_file: Path | None, token_env: str | None) -> str | None:
    given = [x for x in (token, token_file, token_env) if x is not None]
    if len(given) > 1:
        raise InvalidInput("give the token once: --token, --token-file or --token-env")
    if token == "-":
        return sys.stdin.readline().strip()
    if token is not None:
        return token
    if token_file is not None:
        return _read_token_file(token_file)
    if token_env is not None:
        value = os.environ.get(token_env)
        if not value:
            raise InvalidInput(f"environment variable {token_env} is not set")
        return value.strip()
    return None


#: A token file holds one token (WB's are at most 8,192 characters): a larger one is not a token file.
TOKEN_FILE_LIMIT = 64 * 1024
_BOM = b"\xef\xbb\xbf"


def _read_token_file(path: Path) -> str:
    """The token in a regular file of at most TOKEN_FILE_LIMIT bytes, UTF-8 (a leading BOM, as Windows
    editors write, is dropped). A device (/dev/zero), a FIFO or a folder is refused before it is
    read: reading it would never end or fill the memory."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InvalidInput(f"cannot read token file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
        raise InvalidInput(f"token file {path} is {kind}, not a regular file: give the file that holds the token")
    try:
        with path.open("rb") as fh:
            data = fh.read(TOKEN_FILE_LIMIT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read token file {path}: {exc.strerror}") from None
    if len(data) > TOKEN_FILE_LIMIT:
        raise InvalidInput(f"token file {path} is larger than {TOKEN_FILE_LIMIT // 1024} KiB: it does not hold a token")
    try:
        return data.removeprefix(_BOM).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidInput(f"cannot read token file {path}: it is not UTF-8 text") from None


@click.group(name="cabinets")
def cabinets_group() -> None:
    """Seller cabinets (WB accounts): the unit every sync fans out over."""


@cabinets_group.command("add")
@click.argument("cabinet_id")
@click.option("--name", help="Display name (default: the id).")
@click.option("--token", help="WB API token; '-' reads it from stdin. Prefer --token-file or --token-env.")
@click.option("--token-file", type=click.Path(path_type=Path), help="File holding the WB API token.")
@click.option("--token-env", help="Environment variable holding the WB API token.")
@click.option("--status", default="active", show_default=True, type=click.Choice(repo.STATUSES))
def add_cmd(
    cabinet_id: str, name: str | None, token: str | None, token_file: Path | None, token_env: str | None, status: str
) -> None:
    """Register a cabinet. The token is stored encrypted and never printed."""
    secret = _read_token(token, token_file, token_env)
    with open_deployment() as dep:
        with dep.connect() as conn:
            cipher = dep.cipher()
            if secret is not None:
                repo.check_key(conn, cipher, key_source(dep.settings))
            cab = repo.add_cabinet(conn, cipher, cabinet_id, name or cabinet_id, secret, status)
            conn.commit()
        # Its partitions at once, as cabinet_partitions_sensor would add them within a minute: so that
        # `dagster asset materialize --partition 'ID|YYYY-MM-DD'` works right after, with no daemon.
        from dagster import DagsterInstance

        from optima_pipelines.partitions import CABINETS_NAME

        dep.apply_env()
        with DagsterInstance.get() as instance:
            instance.add_dynamic_partitions(CABINETS_NAME, [cab.id])
    click.echo(f"added cabinet {cab.id} ({cab.status}, token {'set' if cab.has_token else 'not set'})")


@cabinets_group.command("set-token")
@click.argument("cabinet_id")
@click.option("--token", help="WB API token; '-' reads it from stdin.")
@click.option("--token-file", type=click.Path(path_type=Path))
@click.option("--token-env")
def set_token_cmd(cabinet_id: str, token: str | None, token_file: Path | None, token_env: str | None) -> None:
    """Replace a cabinet's WB token (a token_invalid cabinet becomes active again)."""
    secret = _read_token(token, token_file, token_env)
    if secret is None:
        raise InvalidInput("give the token with --token, --token-file or --token-env")
    with open_deployment() as dep, dep.connect() as conn:
        cipher = dep.cipher()
        repo.check_key(conn, cipher, key_source(dep.settings), replacing=cabinet_id)
        repo.set_token(conn, cipher, cabinet_id, secret)
        conn.commit()
    click.echo(f"token of cabinet {cabinet_id} replaced")


@cabinets_group.command("list")
def list_cmd() -> None:
    """List cabinets with their status (tokens are never shown)."""
    with open_deployment() as dep, dep.connect() as conn:
        rows = repo.list_cabinets(conn)
    if not rows:
        click.echo("no cabinets")
        return
    width = max(len(c.id) for c in rows)
    for c in rows:
        line = f"{c.id:<{width}}  {c.status:<13}  token {'set' if c.has_token else 'missing':<7}  {c.name}"
        if c.token_rejected_at is not None:
            line += f"  (token rejected {c.token_rejected_at:%Y-%m-%d %H:%M %Z}: {c.token_rejected_reason})"
        click.echo(line)


@cabinets_group.command("set-status")
@click.argument("cabinet_id")
@click.argument("status")
def set_status_cmd(cabinet_id: str, status: str) -> None:
    """Change a cabinet's status: active, paused, token_invalid or archived. Only active cabinets are synced."""
    with open_deployment() as dep, dep.connect() as conn:
        cab = repo.set_status(conn, cabinet_id, status)
        conn.commit()
    click.echo(f"cabinet {cab.id} is now {cab.status}")


@cabinets_group.command("new-key")
def new_key_cmd() -> None:
    """Print a freshly generated token key (for OPTIMA_SECRET_KEY); nothing is stored."""
    click.echo(Fernet.generate_key().decode())


@cabinets_group.command("rotate-key")
@click.option("--new-key-file", type=click.Path(path_type=Path), help="File holding the new key (default: generate).")
@click.option("--new-key-env", help="Environment variable holding the new key (default: generate).")
def rotate_key_cmd(new_key_file: Path | None, new_key_env: str | None) -> None:
    """Re-encrypt every WB token under a new key, in one transaction.

    \b
    Key in the state folder (OPTIMA_SECRET_KEY unset): the new key (generated, or given) is added
    in front of the old one in secret.key, every token is re-encrypted under it in one transaction,
    then the old key is dropped from the file. Interrupted anywhere, the file still holds the key of
    every stored token; run the command again to finish.
    \b
    OPTIMA_SECRET_KEY: set it to NEW,OLD on every process first (generate NEW with
    `optima-pipelines cabinets new-key`), run this, then set it to NEW alone.
    """
    settings = load_settings()
    if settings.secret_key:
        if new_key_file is not None or new_key_env is not None:
            raise InvalidInput(
                "OPTIMA_SECRET_KEY is set: put the new key in front of the old one there (OPTIMA_SECRET_KEY=NEW,OLD) "
                "instead of --new-key-file/--new-key-env"
            )
        keys = split_keys(settings.secret_key.encode())
        if len(keys) < 2:
            raise InvalidInput(
                "OPTIMA_SECRET_KEY holds one key: set OPTIMA_SECRET_KEY=NEW,OLD on every process (NEW from "
                "`optima-pipelines cabinets new-key`), then run rotate-key"
            )
        with open_deployment(settings) as dep, dep.connect() as conn:
            n = repo.rotate_key(conn, TokenCipher(b",".join(keys)), TokenCipher(keys[0]))
            conn.commit()
        click.echo(f"re-encrypted {n} tokens under the first key of OPTIMA_SECRET_KEY")
        click.echo("now set OPTIMA_SECRET_KEY to that key alone on every process")
        return

    path = settings.state_dir / KEY_FILE
    with open_deployment(settings) as dep:  # creates the key file when there is none yet
        current = split_keys(load_key(settings))
        given = _read_key(new_key_file, new_key_env)
        if len(current) > 1 and given is None:
            keys = current  # an interrupted rotation: its new key is already first; finish it
        else:
            keys = [given or Fernet.generate_key(), *current]
            if keys[0] in current:
                raise InvalidInput("the new key is already in use: give a different key")
            write_key_file(path, keys)
        with dep.connect() as conn:
            n = repo.rotate_key(conn, TokenCipher(b",".join(keys)), TokenCipher(keys[0]))
            conn.commit()
        write_key_file(path, keys[:1])
    click.echo(f"re-encrypted {n} tokens under a new key; {path} now holds only the new key")


def _read_key(key_file: Path | None, key_env: str | None) -> bytes | None:
    if key_file is not None and key_env is not None:
        raise InvalidInput("give the new key once: --new-key-file or --new-key-env")
    if key_file is not None:
        try:
            raw = key_file.read_bytes().strip()
        except OSError as exc:
            raise InvalidInput(f"cannot read key file {key_file}: {exc.strerror}") from None
    elif key_env is not None:
        raw = os.environ.get(key_env, "").strip().encode()
        if not raw:
            raise InvalidInput(f"environment variable {key_env} is not set")
    else:
        return None
    keys = split_keys(raw)
    if len(keys) != 1:
        raise InvalidInput("the new key must be exactly one Fernet key")
    return keys[0]


def register(cli: click.Group) -> None:
    cli.add_command(cabinets_group)
