#!/usr/bin/env python
"""``memcore serve`` on granian instead of uvicorn, for ``bench_server.py --http granian`` only.

The same application (``create_app``: FastAPI with the hot routes in front, the worker
threads of ``[server] threads``) in one process, served by granian's embedded server
(``granian.server.embed.Server``: the ASGI interface with its lifespan, on a uvloop event
loop of this process; hyper parses HTTP on a tokio thread outside the GIL). granian is not a
dependency of memcore-server (``pip install granian``); it was measured against uvicorn and
not shipped (docs/guides/server.md, "granian instead of uvicorn").

    python bench/_serve_granian.py CONFIG PATH [rust|asyncio]   # granian's task implementation

Stops on SIGINT / SIGTERM (the lifespan's shut-down runs, then the memory is closed).
"""

from __future__ import annotations

import asyncio
import signal
import sys

import memcore
from memcore_server.app import create_app
from memcore_server.config import load_server_config
from memcore_server.threads import limit_compute_threads


def main() -> None:
    """Serve the memory of settings file ``argv[1]`` at ``argv[2]`` on granian until a signal."""
    import uvloop
    from granian.constants import Interfaces, TaskImpl
    from granian.log import LogLevels
    from granian.server.embed import Server

    config_path, path = sys.argv[1], sys.argv[2]
    task = TaskImpl(sys.argv[3] if len(sys.argv) > 3 else "rust")  # rust: not on Python >= 3.12 (granian falls back to asyncio)
    settings = memcore.load_settings(config_path)
    config = load_server_config(settings.server)
    limit_compute_threads(config.blas_threads)
    memory = memcore.open(settings, path=path)
    try:
        limit_compute_threads(config.blas_threads)
        server = Server(
            create_app(memory, config),
            address=config.host,
            port=config.port,
            interface=Interfaces.ASGI,
            runtime_threads=1,
            task_impl=task,
            websockets=False,
            log_level=LogLevels.warning,
            log_access=False,
        )
        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.stop)
        loop.run_until_complete(server.serve())
    finally:
        memory.close()


if __name__ == "__main__":
    main()
