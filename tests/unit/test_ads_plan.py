"""Pure decisions of the ads sync and of the sensor that resumes paused WB syncs."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from optima_pipelines.sensors.wb_sync import plan_resumes
from optima_pipelines.sync.ads import stat_chunks
from optima_pipelines.wb import Campaign

AT = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)


def campaign(advert_id: int, status: int) -> Campaign:
    raw = {
        "id": advert_id,
        "bid_type": "manual",
        "status": status,
        "settings": {"payment_type": "cpm", "name": "x", "placements": {"search": True, "recommendations": False}},
        "nm_settings": [],
        "timestamps": {
            "created": AT.isoformat(),
            "updated": AT.isoformat(),
            "started": None,
            "deleted": AT.isoformat(),
        },
    }
    return msgspec.convert(raw, Campaign)


def test_statistics_are_asked_for_finished_active_and_paused_campaigns_fifty_at_a_time():
    campaigns = [campaign(i, (9, 11, 7, 4, 8, -1)[i % 6]) for i in range(1, 181)]
    chunks = stat_chunks(campaigns)
    wanted = sorted(c.id for c in campaigns if c.status in (7, 9, 11))
    assert [len(c) for c in chunks] == [50, 40] and [i for chunk in chunks for i in chunk] == wanted


def test_resumes_go_to_active_idle_cabinets_only():
    due = {
        ("a", "ads"): AT,
        ("b", "ads"): AT,
        ("c", "report"): AT,
        ("d", "funnel"): AT,
        ("e", "orders"): AT,
        ("e", "sales"): AT,
        ("e", "orders:range"): AT,
    }
    launches = plan_resumes(due, active=["a", "b", "c", "e"], live_imports={"b"}, busy={"finance_sync": {"c"}})
    # b imports, c's finance sync already runs, d is not active; e's paused orders and sales loads
    # resume as one increment, and a backfill memo is not a sync.
    assert [(cabinet, sync.job.name) for cabinet, sync, _ in launches] == [
        ("a", "ads_sync"),
        ("e", "digitization_increment"),
    ]
