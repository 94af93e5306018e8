"""`claimsched web`: the read-only view over HTTP, on the standard library's
ThreadingHTTPServer. GET and HEAD only (any other method: 405); every response carries a strict
Content-Security-Policy; a database that cannot answer is a 503 page with one line, never a
traceback; no page or JSON holds the DSN."""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import unquote, urlsplit

from ..db import Store, Views, redact_dsn, redact_text
from ..errors import ClaimschedError, ConfigurationError
from . import api, model, pages
from .style import CONTENT_SECURITY_POLICY

log = logging.getLogger("claimsched.web")

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
HTML, JSON = "text/html; charset=utf-8", "application/json"
ALLOWED = "GET, HEAD"
_LARGEST_ID = 2**63 - 1  # job_runs.id is a bigint


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes


class NotFound(Exception):
    """No such page, schedule or run."""


class Site:
    """Paths to pages: what each GET answers, from the database through `Views`."""

    def __init__(self, views: Views, secrets: tuple[str, ...] = ()) -> None:
        self.views = views
        self.secrets = secrets  # text never to show, e.g. the DSN (errors may repeat it)

    def get(self, target: str) -> Response:
        path = urlsplit(target).path
        as_json = path == "/api" or path.startswith("/api/")
        try:
            return self._route(path.removeprefix("/api") if as_json else path, as_json)
        except NotFound as missing:
            return self._error(HTTPStatus.NOT_FOUND, str(missing) or "no such page", as_json)
        except ClaimschedError as exc:  # the database is away, or refused us
            log.warning("database: %s", self._clean(str(exc)))
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, self._clean(str(exc)), as_json)

    def error(self, status: HTTPStatus, reason: str) -> Response:
        return self._error(status, reason, as_json=False)

    def _route(self, path: str, as_json: bool) -> Response:
        if path in ("/", "/schedules", ""):
            overview = model.overview(self.views)
            return self._ok(as_json, lambda: api.overview(overview),
                            lambda: pages.overview(overview))
        if path.startswith("/schedules/"):
            job = unquote(path.removeprefix("/schedules/"))
            found = model.detail(self.views, job)
            if found is None:
                raise NotFound(f"no schedule named {job!r}")
            return self._ok(as_json, lambda: api.detail(found), lambda: pages.schedule(found))
        if path.startswith("/runs/"):
            run = model.run_detail(self.views, _run_id(path.removeprefix("/runs/")))
            if run is None:
                raise NotFound(f"no run with id {path.removeprefix('/runs/')}")
            return self._ok(as_json, lambda: api.run(run), lambda: pages.run(run))
        if path == "/agents":
            agents, now = model.agents(self.views)
            return self._ok(as_json, lambda: api.agents(agents, now),
                            lambda: pages.agents(agents, now))
        raise NotFound("no such page")

    def _ok(self, as_json: bool, data: Callable[[], dict[str, Any]],
            page: Callable[[], str]) -> Response:
        if as_json:
            return Response(HTTPStatus.OK, JSON, json.dumps(data()).encode())
        return Response(HTTPStatus.OK, HTML, page().encode())

    def _error(self, status: HTTPStatus, reason: str, as_json: bool) -> Response:
        if as_json:
            body = json.dumps({"status": int(status), "error": reason}).encode()
            return Response(status, JSON, body)
        return Response(status, HTML, pages.error(status, status.phrase, reason).encode())

    def _clean(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, redact_dsn(secret))
        return " ".join(redact_text(text).split())


def _run_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > _LARGEST_ID:
        raise NotFound(f"no run with id {text[:40]!r}")
    return int(text)


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD through the server's Site; any other method is 405."""

    server: WebServer
    server_version = "claimsched-web"
    timeout = 30  # seconds a client may take to send its request

    def do_GET(self) -> None:
        self._send(self.server.site.get(self.path), body=True)

    def do_HEAD(self) -> None:
        self._send(self.server.site.get(self.path), body=False)

    def __getattr__(self, name: str) -> Any:
        """`do_POST`, `do_PUT`, `do_FOO`...: every other method is refused with 405."""
        if name.startswith("do_"):
            return self._refuse
        raise AttributeError(name)

    def _refuse(self) -> None:
        reason = f"{self.command} is not allowed: this view is read-only (GET, HEAD)"
        self._send(self.server.site.error(HTTPStatus.METHOD_NOT_ALLOWED, reason), body=True,
                   allow=True)

    def _send(self, response: Response, *, body: bool, allow: bool = False) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if allow or response.status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", ALLOWED)
        self.end_headers()
        if body:
            self.wfile.write(response.body)

    def version_string(self) -> str:
        return self.server_version  # no Python version in the Server header

    def end_headers(self) -> None:
        """Every response, also http.server's own (400, 414), has the security headers."""
        for name, value in HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s " + format, self.address_string(), *args)


class WebServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], site: Site) -> None:
        self.site = site
        super().__init__(address, Handler)


def make_server(views: Views, host: str, port: int, secrets: tuple[str, ...] = ()) -> WebServer:
    """A server bound to (host, port) (port 0: any free one), not yet serving."""
    try:
        return WebServer((host, port), Site(views, secrets))
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def parse_bind(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets: [::1]:8080)."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigurationError(f"invalid --bind {text!r}: use HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


class _Stop(Exception):
    """SIGTERM: stop serving."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def serve(dsn: str, schema: str, bind: str) -> int:
    """Serve the view until SIGINT or SIGTERM; the database is first asked at the first GET
    (while it is away, pages are 503 and the view keeps serving)."""
    host, port = parse_bind(bind)
    store = Store(dsn, schema=schema, max_size=4, name="claimsched-web")
    try:
        server = make_server(Views(store), host, port, (dsn,))
        with server:
            bound, bound_port = server.server_address[:2]
            shown = f"[{bound!s}]" if ":" in str(bound) else str(bound)
            print(f"claimsched web: serving http://{shown}:{bound_port}/ (read-only; "
                  "Ctrl-C stops)", flush=True)
            if host not in ("127.0.0.1", "localhost", "::1"):
                log.warning("listening on %s: the view has no login; anyone who can reach "
                            "it can read every schedule and run", host)
            previous = signal.signal(signal.SIGTERM, _stop)
            try:
                server.serve_forever()
            except (KeyboardInterrupt, _Stop):
                pass
            finally:
                signal.signal(signal.SIGTERM, previous)
    finally:
        store.close()
    return 0
