"""Every partitions definition, declared once. Everything else imports from here.

- ``cabinet``: the dynamic dimension of cabinet ids, kept in step with the cabinets table by the
  ``cabinet_partitions_sensor``.
- ``date``: Moscow calendar days (WB's own day), today included.
- ``CABINET_DAY``: cabinet × Moscow day, for feeds, reports and the РНП mart. Its keys read
  ``"<cabinet>|<YYYY-MM-DD>"`` (dimensions are ordered by name: DESIGN.md §4.3).
"""

from __future__ import annotations

from datetime import date

from dagster import (
    DailyPartitionsDefinition,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
)

from optima_pipelines.errors import InvalidInput
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import MOSCOW_TZ_NAME
from optima_pipelines.warehouse.cabinets import validate_cabinet_id

#: Tags Dagster puts on a run over a range of partitions (a backfill with a single-run policy).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
#: Tag Dagster puts on every run of a backfill (its id).
BACKFILL_TAG = "dagster/backfill"

CABINET_DIM = "cabinet"
DATE_DIM = "date"

CABINETS_NAME = "cabinets"
CABINETS = DynamicPartitionsDefinition(name=CABINETS_NAME)
MOSCOW_DAYS = DailyPartitionsDefinition(
    start_date=load_settings().partitions_start,
    timezone=MOSCOW_TZ_NAME,
    end_offset=1,  # today's (still filling) Moscow day is a partition too
)
CABINET_DAY = MultiPartitionsDefinition({CABINET_DIM: CABINETS, DATE_DIM: MOSCOW_DAYS})


def cabinet_day_key(cabinet_id: str, day: date) -> MultiPartitionKey:
    return MultiPartitionKey({CABINET_DIM: cabinet_id, DATE_DIM: day.isoformat()})


def parse_cabinet_day_key(key: str) -> tuple[str, date]:
    """Split ``"cabinet|YYYY-MM-DD"``; raises InvalidInput naming the bad part."""
    parts = key.split("|")
    if len(parts) != 2:
        raise InvalidInput(f"partition key {key!r} is not of the form 'CABINET|YYYY-MM-DD'")
    cabinet_id, day_text = parts
    validate_cabinet_id(cabinet_id)
    try:
        day = date.fromisoformat(day_text)
    except ValueError:
        raise InvalidInput(f"partition key {key!r}: {day_text!r} is not a date (YYYY-MM-DD)") from None
    return cabinet_id, day


#: How a person writes a partition key of each partitions definition (errors name it).
CABINET_DAY_FORM = "CABINET|YYYY-MM-DD (a registered cabinet and a Moscow day)"
CABINET_FORM = "CABINET (a registered cabinet id)"


def explain_bad_key(
    key: str,
    *,
    cabinet_day: bool,
    registered: set[str],
    with_partitions: set[str],
    start: date,
    today: date,
) -> str:
    """Why ``key`` names no partition of ``CABINET_DAY`` (``cabinet_day``) or ``CABINETS``, in one line
    that names the bad part and the valid form: the form, the date, the day's range, the cabinet
    (``registered``: the cabinets table; ``with_partitions``: the cabinets Dagster has partitions of)."""
    form = CABINET_DAY_FORM if cabinet_day else CABINET_FORM
    try:
        if cabinet_day:
            cabinet_id, day = parse_cabinet_day_key(key)
        else:
            cabinet_id, day = validate_cabinet_id(key), None
    except InvalidInput as exc:
        return f"{exc}; partition keys are {form}"
    if day is not None and not start <= day <= today:
        return (
            f"partition key {key!r}: day {day} is outside the partitions ({start} .. {today}, Moscow; "
            f"OPTIMA_PARTITIONS_START sets the first); partition keys are {form}"
        )
    if cabinet_id not in registered:
        known = ", ".join(sorted(registered)[:5]) or "none yet: `optima-pipelines cabinets add`"
        return f"partition key {key!r}: cabinet {cabinet_id!r} is not registered (cabinets: {known}); partition keys are {form}"
    if cabinet_id not in with_partitions:
        return (
            f"partition key {key!r}: cabinet {cabinet_id!r} has no partitions yet: the daemon's "
            "cabinet_partitions_sensor adds them within a minute (run `dagster dev` or `optima-pipelines dev`)"
        )
    return f"partition key {key!r} names no partition; partition keys are {form}"
