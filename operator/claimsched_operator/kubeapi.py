"""The few Kubernetes API calls the operator makes beside kopf's own: read a databaseRef Secret,
create the peering object.

kopf offers no public helper for arbitrary API calls (its clients live in the internal
`kopf._cogs`), so these go through aiohttp, a declared dependency of the `operator` extra and
kopf's own HTTP library, with the credentials that kopf's login handler produced: the handler
hands its `kopf.ConnectionInfo` to `KubeApi.use()`, and the public `as_ssl_context()` and
`as_http_headers()` of that class build the session. One identity for kopf's requests and ours,
and no second kubeconfig parser (the `kubernetes` client would bring both). When kopf logs in
again (after a 401 on its own requests), the next request here uses the new credentials; a 401
here is reported like any other refusal and the caller retries later."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import kopf

from claimsched.version import __version__

USER_AGENT = f"claimsched-operator/{__version__}"


class KubeApiError(Exception):
    """The Kubernetes API refused or failed a request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class KubeApi:
    """An aiohttp session on the API server that kopf logged in to. Use on kopf's event loop."""

    def __init__(self, timeout: float = 30.0, user_agent: str = USER_AGENT) -> None:
        self.timeout = timeout
        self.user_agent = user_agent
        self._info: kopf.ConnectionInfo | None = None
        self._logged_in = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._session_info: kopf.ConnectionInfo | None = None

    def use(self, info: kopf.ConnectionInfo) -> None:
        """The credentials of kopf's latest login; the session follows on the next request."""
        self._info = info
        self._logged_in.set()

    async def _connect(self) -> tuple[aiohttp.ClientSession, kopf.ConnectionInfo]:
        try:
            await asyncio.wait_for(self._logged_in.wait(), self.timeout)
        except TimeoutError:
            raise KubeApiError(0, "not logged in to the Kubernetes API yet") from None
        info = self._info
        assert info is not None
        if self._session is None or self._session_info is not info:
            if self._session is not None:
                await self._session.close()
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=info.as_ssl_context()),
                headers={**info.as_http_headers(), "User-Agent": self.user_agent},
                trust_env=info.trust_env,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
            self._session_info = info
        return self._session, info

    async def request(
        self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """Send one request (`path` like /api/v1/...); the JSON answer, or KubeApiError."""
        session, info = await self._connect()
        url = info.server.rstrip("/") + path
        data = None if body is None else json.dumps(body)
        headers = None if body is None else {"Content-Type": "application/json"}
        try:
            async with session.request(method, url, data=data, headers=headers,
                                       proxy=info.proxy_url) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeApiError(0, f"{method} {path} failed: {exc!r}") from None
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {"message": text[:200]}
        if not isinstance(answer, dict):
            answer = {}
        if status >= 400:
            raise KubeApiError(status, str(answer.get("message") or answer.get("reason") or ""))
        return answer

    async def get(self, path: str) -> dict[str, Any]:
        return await self.request("GET", path)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
