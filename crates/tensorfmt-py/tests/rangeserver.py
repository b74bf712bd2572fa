"""A range-capable HTTP server on 127.0.0.1 for the tests, counting what it serves.

Python's ``http.server`` ignores ``Range``; this handler answers ``Range: bytes=a-b``
(and ``a-``, ``-n``) with ``206 Partial Content`` and ``Content-Range``, ``HEAD`` with the
length, ``Last-Modified`` and an ``ETag`` (both from the file's size and mtime, as a
static file server gives them), and counts the body bytes and requests per path::

    with RangeServer(directory) as srv:
        url = srv.url("movie.pvp")
        ...
        srv.served("movie.pvp"), srv.requests("movie.pvp")
"""

from __future__ import annotations

import email.utils
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Optional, Tuple

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without this, Nagle's algorithm and the
    # client's delayed ACK add 40 ms to every small response.
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _file(self) -> Optional[str]:
        rel = self.path.split("?", 1)[0].lstrip("/")
        full = os.path.realpath(os.path.join(self.server.root, rel))
        if not full.startswith(self.server.root + os.sep) or not os.path.isfile(full):
            return None
        return full

    def _headers(self, full: str) -> Tuple[int, Dict[str, str]]:
        st = os.stat(full)
        return st.st_size, {
            "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
            "ETag": f'"{st.st_size:x}-{st.st_mtime_ns:x}"',
            "Accept-Ranges": "bytes",
        }

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        full = self._file()
        if full is None:
            self.send_error(404)
            return
        size, headers = self._headers(full)
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        self.server.count(self.path, 0)

    def do_GET(self) -> None:  # noqa: N802
        full = self._file()
        if full is None:
            self.send_error(404)
            return
        size, headers = self._headers(full)
        start, end, status = 0, size, 200
        spec = self.headers.get("Range")
        if spec:
            m = _RANGE.match(spec.strip())
            if not m or (not m.group(1) and not m.group(2)):
                self.send_error(416)
                return
            a, b = m.group(1), m.group(2)
            if a:
                start = int(a)
                end = min(size, int(b) + 1) if b else size
            else:
                start = max(0, size - int(b))
            if start >= size or start >= end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        with open(full, "rb") as f:  # noqa: PTH123
            f.seek(start)
            body = f.read(end - start)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.count(self.path, len(body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Clients open many connections at once (fsspec, obstore): the default backlog of 5
    # drops SYNs, which the kernel retries after one, three, seven seconds.
    request_queue_size = 256

    def __init__(self, root: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = os.path.realpath(root)
        self.lock = threading.Lock()
        self.bytes: Dict[str, int] = {}
        self.calls: Dict[str, int] = {}

    def count(self, path: str, n: int) -> None:
        key = path.split("?", 1)[0].lstrip("/")
        with self.lock:
            self.bytes[key] = self.bytes.get(key, 0) + n
            self.calls[key] = self.calls.get(key, 0) + 1


class RangeServer:
    """Serves ``root`` on 127.0.0.1 (a free port) in a thread while in a ``with`` block."""

    def __init__(self, root: str) -> None:
        self._server = _Server(root)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "RangeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def served(self, rel: Optional[str] = None) -> int:
        """Body bytes served (for one path, or all)."""
        with self._server.lock:
            if rel is None:
                return sum(self._server.bytes.values())
            return self._server.bytes.get(rel, 0)

    def requests(self, rel: Optional[str] = None) -> int:
        with self._server.lock:
            if rel is None:
                return sum(self._server.calls.values())
            return self._server.calls.get(rel, 0)

    def reset(self) -> None:
        with self._server.lock:
            self._server.bytes.clear()
            self._server.calls.clear()
