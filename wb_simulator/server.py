"""Running the simulator over HTTP: in a background thread for tests, or in the foreground for the CLI."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from wb_simulator.app import create_app
from wb_simulator.simulator import Simulator


def _server(sim: Simulator) -> uvicorn.Server:
    # A stopped simulator does not wait for requests held open by a latency fault.
    config = uvicorn.Config(
        create_app(sim), log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
    )
    return uvicorn.Server(config)


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening now, not when uvicorn gets to it: whoever is told the address (wb-sim prints it at
    # once) may connect straight away, and the connection waits in the backlog instead of being refused.
    sock.listen(2048)
    return sock


@contextmanager
def serve(sim: Simulator, host: str = "127.0.0.1", port: int = 0, *, ready_timeout: float = 10.0) -> Iterator[str]:
    """Serve ``sim`` on ``host:port`` (0: a free port) in a background thread; yields the base URL.

    The server accepts requests before this returns, and is stopped (and its thread joined) on exit.
    """
    sock = bind(host, port)
    server = _server(sim)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="wb-simulator", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + ready_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the WB simulator did not start on {host}:{sock.getsockname()[1]}")
            time.sleep(0.01)
        bound_host = f"[{host}]" if ":" in host else host
        yield f"http://{bound_host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=ready_timeout)
        sock.close()


def run_forever(sim: Simulator, sock: socket.socket) -> None:
    """Serve ``sim`` on a bound socket in the foreground until interrupted (Ctrl-C, SIGTERM)."""
    try:
        _server(sim).run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn shuts down on Ctrl-C, then raises the signal again: a stop asked for is a clean exit.
        pass
    finally:
        sock.close()
