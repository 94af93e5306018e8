"""What kmock 0.8 lacks for a strict Kubernetes API emulator, closed in one place.

Every use of kmock's internals (`kmock._internal`) is in this module, and kmock is pinned ==0.8
(pyproject, the dev extra) because of them:

- `/api/v1/namespaces[/name]`: kmock 0.8's path parser crashes on these paths (Namespaces are
  cluster-scoped); `parse_namespace_paths()` makes it read them as the Namespace resource.
- The bundled list of built-in resources: kmock 0.8's `load_bundled()` reads it with the
  deprecated `importlib.resources.read_binary` (a DeprecationWarning, an error in our tests);
  `bundled_resources()` reads the same file without it.

The emulator (kube_emulator.py) also overrides kmock 0.8's private hooks of public classes
(`_handle`, `_serve_list`, `_serve_watch`, `_objects`): the same pin covers them. Before moving
the pin, check each of these against the new kmock.
"""

from __future__ import annotations

import gzip
import importlib.resources
import re

from kmock._internal import parsing

_NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+))?(?:/(status|finalize))?/?")
_original_parse_path = parsing.parse_path


def _parse_path(path: str) -> parsing.ParsedPath:
    if match := _NAMESPACE_PATH.fullmatch(path):
        return parsing.ParsedPath("", "v1", "namespaces", None, match[1], match[2])
    return _original_parse_path(path)


def parse_namespace_paths() -> None:
    """Make kmock parse `/api/v1/namespaces[/name[/status|/finalize]]` (idempotent)."""
    parsing.parse_path = _parse_path


def bundled_resources() -> bytes:
    """kmock's bundled list of built-in resources, for `ResourcesView.load_data()`."""
    bundled = importlib.resources.files("kmock._internal") / "resources.json.gz"
    return gzip.decompress(bundled.read_bytes())
