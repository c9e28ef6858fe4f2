"""The application ``memcore serve`` hands to uvicorn: FastAPI, with the hot routes in front of it.

:class:`FrontedFastAPI` is a :class:`fastapi.FastAPI` whose ``__call__`` first offers each
request to its :class:`.hotpath.HotRoutes`: a request to a hot route is answered there, before
FastAPI's middleware stack (its error and telemetry middlewares, the key guard and the body
limit as middlewares, routing, dependencies) is entered; every other request, and the
lifespan, go through FastAPI unchanged. Everything else about the application (its routes,
its OpenAPI schema) is FastAPI's.

A middleware added to the application once it is built (``app.add_middleware``, e.g. CORS)
must see every request: the front then steps aside, and the hot routes are served by their
FastAPI routes (the same handlers, behind the key guard and body limit middlewares).
"""

from __future__ import annotations

from fastapi import FastAPI

from typing import Any

from .hotpath import HotRoutes, Message, Receive, Send

__all__ = ["FrontedFastAPI"]


class FrontedFastAPI(FastAPI):
    """FastAPI with :attr:`hot_routes` answered before its middleware stack (see the module)."""

    hot_routes: HotRoutes | None = None
    """The routes answered in front (None: FastAPI serves every request)."""

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        """Serve a hot route in front, or hand the request to FastAPI."""
        hot = self.hot_routes
        if hot is not None and hot.serves(scope):
            await hot(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def add_middleware(self, middleware_class: Any, *args: Any, **kwargs: Any) -> None:
        """FastAPI's ``add_middleware``; the hot routes are then served inside the stack (see the module)."""
        self.hot_routes = None
        super().add_middleware(middleware_class, *args, **kwargs)
