"""The raw landing of WB's answers (store.py), the replay that rebuilds the warehouse from it
(replay.py) and what WB last said, for the mart's checks (totals.py). docs/landing.md."""
