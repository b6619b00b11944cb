"""What is not per cabinet: WB's news feed and the warehouses' acceptance coefficients (slots)."""

from __future__ import annotations

from datetime import date
from typing import Any

from wb_simulator import catalogs
from wb_simulator.timefmt import date_to_dn, day_number, day_start, dn_to_date, msk_offset
from wb_simulator.world import rng_for, seed_of


class News:
    """WB's portal news: about one item every two days, ids growing with time."""

    def __init__(self, seed: int, first_dn: int):
        self.seed = seed
        self.items: list[dict[str, Any]] = []
        self._next_dn = first_dn
        self._next_id = 7000

    def ensure(self, t: int) -> None:
        while self._next_dn <= day_number(t):
            dn = self._next_dn
            self._next_dn += 1
            rng = rng_for(self.seed, "news", dn)
            if rng.random() >= 0.5:
                continue
            header = catalogs.NEWS_HEADERS[int(rng.integers(0, len(catalogs.NEWS_HEADERS)))]
            kind = catalogs.NEWS_TYPES[int(rng.integers(0, len(catalogs.NEWS_TYPES)))]
            ts = day_start(dn) + 10 * 3600 + int(rng.integers(0, 8 * 3600))
            self.items.append(
                {
                    "id": self._next_id,
                    "header": header,
                    "content": f"{header}. Подробности в разделе «Новости» портала продавцов ({dn_to_date(dn)}).",
                    "date": msk_offset(ts),
                    "types": [{"id": kind[0], "name": kind[1]}],
                    "_ts": ts,
                }
            )
            self._next_id += 1

    def select(self, t: int, from_dn: int | None, from_id: int | None, limit: int = 100) -> list[dict[str, Any]]:
        self.ensure(t)
        out = []
        for item in self.items:
            if item["_ts"] > t:
                break
            if from_id is not None and item["id"] < from_id:
                continue
            if from_dn is not None and day_number(item["_ts"]) < from_dn:
                continue
            out.append({k: v for k, v in item.items() if k != "_ts"})
            if len(out) == limit:
                break
        return out


class Slots:
    """Acceptance coefficients for the next 14 days, changing every six hours, with test overrides."""

    def __init__(self, seed: int):
        self.seed = seed
        self.disabled = False
        self.overrides: dict[tuple[int, int, int], tuple[int, bool]] = {}

    def open(self, warehouse_id: int, day: date, coefficient: int, box_type_id: int | None, allow_unload: bool) -> None:
        known = {w for w, _ in catalogs.WAREHOUSES}
        if warehouse_id not in known:
            raise ValueError(f"unknown warehouse {warehouse_id}; the simulator's warehouses are {sorted(known)}")
        if coefficient < -1:
            raise ValueError(f"coefficient must be -1 or more, got {coefficient}")
        for box in (box_type_id,) if box_type_id is not None else catalogs.BOX_TYPES:
            self.overrides[(warehouse_id, date_to_dn(day), box)] = (coefficient, allow_unload)

    def coefficients(self, t: int, warehouse_ids: set[int] | None) -> list[dict[str, Any]]:
        today = day_number(t)
        bucket = int(t) // (6 * 3600)
        out = []
        for wh_id, wh_name in catalogs.WAREHOUSES:
            if warehouse_ids is not None and wh_id not in warehouse_ids:
                continue
            for dn in range(today, today + 14):
                for box in catalogs.BOX_TYPES:
                    if (wh_id, dn, box) in self.overrides:
                        coefficient, allow = self.overrides[(wh_id, dn, box)]
                    else:
                        h = seed_of(self.seed, "slot", wh_id, dn, box, bucket) % 100
                        coefficient = -1 if h < 40 else 0 if h < 50 else 1 if h < 62 else 2 + h % 9
                        allow = coefficient >= 0 and h % 5 != 0
                    out.append(
                        {
                            "date": f"{dn_to_date(dn).isoformat()}T00:00:00Z",
                            "coefficient": coefficient,
                            "warehouseID": wh_id,
                            "warehouseName": wh_name,
                            "allowUnload": allow,
                            "boxTypeID": box,
                            "storageCoef": None if coefficient < 0 else "100",
                            "deliveryCoef": None if coefficient < 0 else "100",
                            "deliveryBaseLiter": None if coefficient < 0 else "46.00",
                            "deliveryAdditionalLiter": None if coefficient < 0 else "14.00",
                            "storageBaseLiter": None if coefficient < 0 else "0.08",
                            "storageAdditionalLiter": None if coefficient < 0 else "0.08",
                            "isSortingCenter": wh_id in catalogs.SORTING_CENTERS,
                        }
                    )
        return out
