"""The landing's store on its own: answers land, become Parquet per feed and Moscow day, read back in
arrival order, on a local folder and on an S3-compatible server (moto's, on localhost); retention
drops old days; a spool whose process died is published by the next flush; readers other than ours
(pandas) read the dataset."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, date, datetime
from pathlib import Path

import boto3
import pandas as pd
import pytest
from moto.server import ThreadedMotoServer

from optima_pipelines.landing.store import Landing, LandingError, sync_context


def land(landing: Landing, cabinet: str, group: str, answer: bytes, at: datetime) -> None:
    category, _, _ = group.partition(".")
    landing.land(
        cabinet,
        method="GET",
        category=category,
        path=f"/{group}",
        limit_group=group,
        params={"dateFrom": "2026-08-01", "flag": 0},
        request_body=None,
        status=200,
        answer=answer,
        received_at=at,
    )


#: 23:30 Moscow on 19 August and 00:30 on the 20th: two Moscow days.
LATE = datetime(2026, 8, 19, 20, 30, tzinfo=UTC)
EARLY = datetime(2026, 8, 19, 21, 30, tzinfo=UTC)


def exercise(landing: Landing) -> None:
    with sync_context("optima_pipelines.sync.digitization.sync_increment", "run-1", {"cabinet_id": "c1"}):
        land(landing, "c1", "statistics.orders", b'[{"srid": "a"}]', LATE)
        land(landing, "c2", "statistics.orders", b'[{"srid": "b"}]', LATE)
        land(landing, "c1", "statistics.orders", b"[]", EARLY)
        land(landing, "c1", "statistics.sales", b'[{"saleID": "S1"}]', EARLY)
    files = landing.flush()
    # One file per feed and Moscow day, whatever the number of cabinets.
    assert sorted(f.split("/")[-3] + "/" + f.split("/")[-2] for f in files) == [
        "feed=orders/day=2026-08-19",
        "feed=orders/day=2026-08-20",
        "feed=sales/day=2026-08-20",
    ]
    c1 = landing.read("c1")
    assert [(r["feed"], r["day"], r["answer"]) for r in c1.to_pylist()] == [
        ("orders", date(2026, 8, 19), b'[{"srid": "a"}]'),
        ("orders", date(2026, 8, 20), b"[]"),
        ("sales", date(2026, 8, 20), b'[{"saleID": "S1"}]'),
    ]
    assert {r["sync"] for r in c1.to_pylist()} == {"optima_pipelines.sync.digitization.sync_increment"}
    assert landing.read("c2", feeds=["sales"]).num_rows == 0
    assert landing.read("c2", first=date(2026, 8, 19), last=date(2026, 8, 19)).num_rows == 1

    # Retention: 2026-08-19 is older than one day before 2026-08-21; the 20th stays.
    gone = landing.prune(1, date(2026, 8, 21))
    assert [g.split("/")[-1] for g in gone] == ["day=2026-08-19"]
    assert landing.read("c2").num_rows == 0
    assert landing.read("c1").num_rows == 2


def test_a_local_landing(tmp_path: Path) -> None:
    landing = Landing(str(tmp_path / "landing"), tmp_path / "spool")
    exercise(landing)
    # What an analyst reads with pandas (hive partitions: feed and day are columns).
    frame = pd.read_parquet(tmp_path / "landing")
    assert sorted(frame["feed"].astype(str)) == ["orders", "sales"]
    assert set(frame["cabinet_id"]) == {"c1"}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="wb-landing")
    try:
        yield endpoint
    finally:
        server.stop()


def test_a_landing_on_s3(s3: str, tmp_path: Path) -> None:
    url = f"s3://wb-landing/prod?endpoint_override={s3.removeprefix('http://')}&scheme=http&region=us-east-1"
    landing = Landing(url, tmp_path / "spool")
    exercise(landing)
    keys = [
        o["Key"]
        for o in boto3.client("s3", endpoint_url=s3, region_name="us-east-1").list_objects_v2(Bucket="wb-landing")[
            "Contents"
        ]
    ]
    # (pyarrow keeps a folder marker where it deleted the last day of a feed)
    files = [k for k in keys if not k.endswith("/")]
    assert sorted(k.split("/")[2] for k in files) == ["day=2026-08-20", "day=2026-08-20"], keys
    assert all(k.startswith("prod/feed=") and k.endswith(".parquet") for k in files), keys


def test_a_dead_processs_spool_is_published_by_the_next_flush(tmp_path: Path) -> None:
    """A process killed after landing (its run never reached the flush): its answers are not lost."""
    script = textwrap.dedent(
        f"""
        import os
        from datetime import UTC, datetime
        from pathlib import Path
        from optima_pipelines.landing.store import Landing
        landing = Landing({str(tmp_path / "landing")!r}, Path({str(tmp_path / "spool")!r}))
        for n in range(3):
            landing.land("c9", method="GET", category="statistics", path="/o", limit_group="statistics.orders",
                         params=None, request_body=None, status=200, answer=b"[%d]" % n,
                         received_at=datetime(2026, 8, 20, 9, n, tzinfo=UTC))
        os._exit(9)  # no flush, no atexit
        """
    )
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert died.returncode == 9, died.stderr
    spools = list((tmp_path / "spool").glob("spool-*.arrows"))
    assert len(spools) == 1
    # Its last answer torn mid-write, as a kill during an append leaves it.
    spools[0].write_bytes(spools[0].read_bytes()[:-20])

    landing = Landing(str(tmp_path / "landing"), tmp_path / "spool")
    assert landing.read("c9").num_rows == 0
    assert len(landing.flush()) == 1
    assert [r["answer"] for r in landing.read("c9").to_pylist()] == [b"[0]", b"[1]"]
    assert list((tmp_path / "spool").glob("spool-*.arrows")) == []


def test_an_answer_that_cannot_be_spooled_raises(tmp_path: Path) -> None:
    (tmp_path / "spool").write_text("not a folder")
    landing = Landing(str(tmp_path / "landing"), tmp_path / "spool")
    with pytest.raises(LandingError, match=r"could not land WB's answer to GET statistics /statistics.orders"):
        land(landing, "c1", "statistics.orders", b"[]", LATE)


def test_a_bad_landing_url_is_one_clear_error(tmp_path: Path) -> None:
    from optima_pipelines.errors import ConfigError

    with pytest.raises(ConfigError, match="OPTIMA_LANDING_URL"):
        Landing("nosuchscheme://x/y", tmp_path / "spool")
