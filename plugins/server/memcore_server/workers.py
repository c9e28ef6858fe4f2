"""``memcore serve --workers N``: N server processes on one port, for a store shared between processes.

One server process is bound by one core (Python's GIL). A store that several processes may
write at once (``store.shared``: the postgres store, whose transactions and op log keep
every process's in-memory indexes current) can be served by N processes: uvicorn's
supervisor binds the port once, starts N worker processes that accept on it, restarts a
worker that dies, and stops them all on SIGINT / SIGTERM. Each worker opens the memory
itself (:func:`worker_app`), warms it and closes it when it stops.

A store that is not shared (SQLite: one writer process, its indexes in that process) is
refused with N > 1 (:func:`check_shared`): the processes would each keep indexes that the
others' writes leave stale.

The parent opens the memory once before the workers start, so that a memory created on
first open is created by one process, not raced by N.
"""

from __future__ import annotations

import json
import os
from typing import Any

import memcore
from memcore import ConfigError

from .config import ServerConfig, load_server_config

__all__ = ["check_shared", "serve_workers", "worker_app", "WORKER_ENV"]

WORKER_ENV = "_MEMCORE_SERVE_WORKER"
"""The environment variable handing a worker process what to serve (a JSON object: the
settings file, the memory path, host, port and workers), set by :func:`serve_workers`. Not a
``MEMCORE_`` variable: the settings would take it for one of theirs."""


def check_shared(memory: memcore.Memory, workers: int) -> None:
    """Refuse ``workers`` > 1 for a memory whose store is not shared between processes.

    :raises ConfigError: ``workers`` > 1 and the store is not shared (located as ``server.workers``).
    """
    store = memory.collection.store
    if workers > 1 and not store.shared:
        raise ConfigError(
            f"--workers {workers} needs a store shared between processes (the postgres store); the {type(store).__name__} "
            "of this memory has one writer process and keeps its indexes in it: serve it with one worker",
            location="server.workers",
        )


def serve_workers(config_path: str | None, path: str | None, config: ServerConfig, log_level: str) -> None:
    """Run ``config.workers`` worker processes serving the memory at ``path`` (uvicorn's supervisor; returns when they stop)."""
    import uvicorn

    from .protocol import HotRoutesProtocol

    os.environ[WORKER_ENV] = json.dumps({"config": config_path, "path": path, "host": config.host, "port": config.port, "workers": config.workers})
    uvicorn.run(
        f"{__name__}:worker_app",
        factory=True,
        workers=config.workers,
        host=config.host,
        port=config.port,
        log_level=log_level,
        access_log=log_level in ("info", "debug"),
        timeout_graceful_shutdown=5,
        http=HotRoutesProtocol,
    )


def worker_app() -> Any:
    """The application of one worker process (uvicorn calls it in each): the memory of the
    settings :func:`serve_workers` handed down, opened here and closed when the worker stops."""
    from .app import create_app
    from .threads import limit_compute_threads

    spec = json.loads(os.environ[WORKER_ENV])
    settings = memcore.load_settings(spec["config"])
    config = load_server_config(settings.server, host=spec["host"], port=spec["port"], workers=spec["workers"])
    limit_compute_threads(config.blas_threads)  # before the libraries load (environment), and
    memory = memcore.open(settings, path=spec["path"])
    try:
        limit_compute_threads(config.blas_threads)  # those the memory loaded (threadpoolctl)
        check_shared(memory, config.workers)
        return create_app(memory, config, owns_memory=True)
    except BaseException:
        memory.close()
        raise
