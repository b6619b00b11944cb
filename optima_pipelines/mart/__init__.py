"""The РНП mart, free of Dagster: which (cabinet, day)s a feed change makes stale and how they are
batched into runs (``plan``), the recompute of the four tables (``recompute``), the mart's checks
against the feeds (``checks``); all its SQL in ``sql/``. assets/rnp.py and sensors/rnp.py are its
Dagster shell."""
