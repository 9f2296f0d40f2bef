"""The demo page's server: loopback only, the page, its data and onnxruntime-web's files."""

import functools
import http.server
import sys
import threading
from pathlib import Path
from typing import ClassVar

PAGE = Path(__file__).parent
ORT_DIST = PAGE / "node_modules" / "onnxruntime-web" / "dist"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the page from this package, /ort/ from onnxruntime-web, the rest from the site."""

    extensions_map: ClassVar[dict[str, str]] = {
        ".html": "text/html; charset=utf-8",
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".json": "application/json",
        ".wasm": "application/wasm",
        ".onnx": "application/octet-stream",
        "": "application/octet-stream",
    }

    def translate_path(self, path):
        route = path.split("?", 1)[0].split("#", 1)[0]
        if route in ("/", "/index.html"):
            return str(PAGE / "index.html")
        if route == "/app.mjs":
            return str(PAGE / "app.mjs")
        if route.startswith("/ort/") and route[len("/ort/") :] in ORT_FILES:
            return str(ORT_DIST / route[len("/ort/") :])
        return super().translate_path(path)

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    """A threading server that takes a browser closing a connection early in its stride."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted
            return
        super().handle_error(request, client_address)


def check_runtime() -> None:
    missing = [name for name in ORT_FILES if not (ORT_DIST / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"onnxruntime-web is not installed ({', '.join(missing)} missing): run "
            f"`npm ci --ignore-scripts` in {PAGE}"
        )


def serve(site: Path, port: int = 0):
    """Serve on 127.0.0.1 in a background thread; returns (server, url)."""
    check_runtime()
    handler = functools.partial(Handler, directory=str(site))
    server = Server(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
