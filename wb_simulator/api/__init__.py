"""The WB methods the simulator serves, one module per WB category; importing this registers them."""

from wb_simulator.api import advert, analytics, common, content, feedbacks, finance, prices, statistics
from wb_simulator.api.base import ENDPOINTS, Endpoint, Request, Response

__all__ = [
    "ENDPOINTS",
    "Endpoint",
    "Request",
    "Response",
    "advert",
    "analytics",
    "common",
    "content",
    "feedbacks",
    "finance",
    "prices",
    "statistics",
]
