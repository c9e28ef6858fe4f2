"""The application ``memcore serve`` hands to uvicorn: FastAPI, with the hot routes in front of it.

:class:`FrontedFastAPI` is a :class:`fastapi.FastAPI` whose ``__call__`` first offers each
request to its :class:`.hotpath.HotRoutes`: a request to a hot route is answered there, before
FastAPI's middleware stack (its error and telemetry middlewares, the key guard and the body
limit as middlewares, routing, dependencies) is entered; every other request, and the
lifespan, go through FastAPI unchanged. Everything else about the application (its routes,
its OpenAPI schema, ``add_middleware``) is FastAPI's.
"""

from __future__ import annotations

from fastapi import FastAPI

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
