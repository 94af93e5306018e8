"""Liveness and readiness over HTTP: GET /healthz (the operator's loops are alive) and
GET /readyz (the default database answers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

Probe = Callable[[], tuple[bool, str]]


class HealthServer:
    """A tiny aiohttp server on the operator's event loop."""

    def __init__(self, port: int, alive: Probe, ready: Callable[[], bool]) -> None:
        self.port = port
        self._alive = alive
        self._ready = ready
        self._runner: web.AppRunner | None = None

    async def _healthz(self, _: web.Request) -> web.Response:
        ok, detail = self._alive()
        return web.Response(status=200 if ok else 503, text=detail + "\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        try:
            ok = await asyncio.wait_for(asyncio.to_thread(self._ready), timeout=5)
        except Exception:
            ok = False
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "not ready\n")

    async def start(self) -> None:
        if not self.port:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "0.0.0.0", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
