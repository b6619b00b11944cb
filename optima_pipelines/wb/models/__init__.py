"""Typed WB rows, decoded and validated in one pass from JSON bytes (msgspec): WB's wire schema, one
module per WB API section, as ``wb/client.py`` is laid out: ``statistics`` (orders, sales),
``finance`` (the realization report), ``advertising`` (campaigns, fullstats, bids), ``analytics``
(funnel, stocks), ``content`` (cards), ``prices`` (prices, upload tasks), ``feedbacks`` (feedbacks,
questions), ``common`` (acceptance slots, news, ping); ``base`` holds what they share. Code outside
``wb/`` imports them from ``optima_pipelines.wb``.

Conventions for every model:
- attributes are snake_case, decoded from WB's camelCase keys (explicit names where WB's casing is
  irregular: ``incomeID``, ``saleID``, ``nmID``, ``sum_price``);
- a field is required only where WB's OpenAPI requires it, or where it is one of the model's
  ``KEYS``: the few fields a sync cannot do without (a row's key, the day it is counted on, a
  paging cursor, the listing itself), each with its reason. A row missing a key is refused on its
  own (``wb.screening``: recorded with the reason, the page's other rows kept); a missing key outside
  any row fails the page with ``WbResponseError`` naming the endpoint and the field's JSON path.
  Bad values (NaN, ±Infinity, amounts and dates out of range) refuse their row the same way, and a
  row whose time is in the future is flagged (docs/data.md, "Bad values from WB"). Every other field WB's spec
  marks optional is optional here: absent, it is None (NULL in the warehouse) unless the field's
  comment states another default (tests/unit/test_wb_spec_models.py holds every model to WB's files);
- money is ``Decimal`` exactly as WB wrote it: JSON numbers (statistics) and the finance API's
  strings alike, never through float;
- naive WB timestamps are Moscow wall time and become aware ``Europe/Moscow`` datetimes; aware ones
  are converted to Moscow; WB's ``0001-01-01T00:00:00`` "no date" becomes None;
- a warehouse table's column layout is declared beside its load (``sync/<domain>.py``). A model
  that is a table's row as WB sends it is a ``base.Row``: ``COLUMNS`` (its fields, then the
  ``DERIVED`` columns such as the Moscow ``day``) and ``copy_row()`` (the values in that order),
  which the load puts after ``cabinet_id``. Tables laid out otherwise (campaigns and their
  products, cards, prices, news) are mapped by their loads (``sync.ads.campaign_row``, ...).
"""
