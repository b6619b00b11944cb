"""A local HTTP server for tests that need a WB-like endpoint with a fixed behaviour (not the simulator)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: What the server answers a GET: (status, extra headers, JSON body).
Answer = tuple[int, dict[str, str], bytes]


@contextmanager
def json_server(answer: Callable[[BaseHTTPRequestHandler], Answer]) -> Iterator[str]:
    """Serve every GET with ``answer(request)`` as ``application/json`` on 127.0.0.1; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = answer(self)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
