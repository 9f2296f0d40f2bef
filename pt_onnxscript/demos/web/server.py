"""The demo pages' server: loopback only, the pages, their data and onnxruntime-web's files."""

import functools
import http.server
import json
import sys
import threading
from pathlib import Path
from typing import ClassVar

PAGE = Path(__file__).parent
ORT_DIST = PAGE / "node_modules" / "onnxruntime-web" / "dist"
# The pages' own files: the digits demo's (index.html, app.mjs) and the sampler demo's.
PAGE_FILES = ("app.mjs", "sampler.html", "sampler.mjs", "sampler-worker.mjs", "sampler-seed.mjs")
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
        if route[1:] in PAGE_FILES:
            return str(PAGE / route[1:])
        if route.startswith("/ort/") and route[len("/ort/") :] in ORT_FILES:
            return str(ORT_DIST / route[len("/ort/") :])
        return super().translate_path(path)

    def do_POST(self):
        """The page's report of loading the model, ``{"bytes": n, "milliseconds": t}``,
        handed to the server's `on_loaded`."""
        if self.path != "/loaded":
            self.send_error(404)
            return
        try:
            report = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            loaded = int(report["bytes"]), float(report["milliseconds"])
        except (ValueError, TypeError, KeyError):
            self.send_error(400, "expected {bytes, milliseconds}")
            return
        self.send_response(204)
        self.end_headers()
        self.server.on_loaded(*loaded)

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    """A threading server that takes a browser closing a connection early in its stride, and
    hands each page's report of loading the model (its bytes, its milliseconds) to
    `on_loaded`."""

    daemon_threads = True

    def __init__(self, address, handler, on_loaded=None):
        super().__init__(address, handler)
        self.on_loaded = on_loaded or (lambda size, milliseconds: None)

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


def serve(site: Path, port: int = 0, on_loaded=None):
    """Serve on 127.0.0.1 in a background thread; returns (server, url). `on_loaded(size,
    milliseconds)` is called when a page has loaded the model."""
    check_runtime()
    handler = functools.partial(Handler, directory=str(site))
    server = Server(("127.0.0.1", port), handler, on_loaded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def check_can_serve(port: int) -> None:
    """What a demo checks before its work: onnxruntime-web installed and `port` free on
    127.0.0.1, or SystemExit saying what to do."""
    import socket

    try:
        check_runtime()
    except FileNotFoundError as err:
        raise SystemExit(f"{err} (or pass --no-serve)") from err
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as err:
            raise SystemExit(f"port {port} is not free ({err.strerror}): pass --port N") from err


def serve_until_interrupted(site: Path, port: int, page: str, what: str, on_loaded=None):
    """Serve `site` on 127.0.0.1:`port`, say where to open `page` to `what`, and serve until
    Ctrl-C."""
    server, url = serve(site, port=port, on_loaded=on_loaded)
    print(f"open {url}/{page} to {what} (Ctrl-C to stop)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
