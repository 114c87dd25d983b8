"""What the tests share: the running tracegate they are given (by test/sdk/python.test.ts, through the environment),
reads of what it stored, and a local HTTP receiver that records requests and answers as a test says."""

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

URL = os.environ.get("TRACEGATE_TEST_URL", "")
KEY = os.environ.get("TRACEGATE_TEST_KEY", "")
# A tracegate allowing 2 requests a second per key (a 429 storm for any real load).
LIMITED_URL = os.environ.get("TRACEGATE_TEST_LIMITED_URL", "")
LIMITED_KEY = os.environ.get("TRACEGATE_TEST_LIMITED_KEY", "")
# Set when the server has the signal routes (POST /api/ingest/feedback, /api/ingest/tool-calls).
SIGNALS = os.environ.get("TRACEGATE_TEST_SIGNALS") == "1"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def need_server(test) -> None:
    if not URL or not KEY:
        test.skipTest("no running tracegate (TRACEGATE_TEST_URL, TRACEGATE_TEST_KEY): run through make test")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _get(url: str, key: str) -> Any:
    """A read; the rate-limited server's 429s are waited out (its Retry-After)."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    for _ in range(30):
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return json.loads(res.read())
        except urllib.error.HTTPError as e:
            if e.code != 429:
                raise
            time.sleep(float(e.headers.get("Retry-After") or 1))
    raise AssertionError(f"{url}: still rate limited")


def wait_stored(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """The server answers once a batch is durable; reads see it after its next flush to storage (~100 ms here)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("not stored in time")
        time.sleep(0.05)


def list_traces(base: str = "", key: str = "", **filters: str) -> List[Dict[str, Any]]:
    base, key = base or URL, key or KEY
    out: List[Dict[str, Any]] = []
    cursor = ""
    while True:
        q = {"limit": "1000", **filters}
        if cursor:
            q["cursor"] = cursor
        page = _get(f"{base}/api/traces?{urllib.parse.urlencode(q)}", key)
        out.extend(page["items"])
        cursor = page.get("nextCursor") or ""
        if not cursor:
            return out


def read_trace(trace_id: str, base: str = "", key: str = "") -> Optional[Dict[str, Any]]:
    try:
        return _get(f"{base or URL}/api/traces/{urllib.parse.quote(trace_id)}", key or KEY)["trace"]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Request:
    def __init__(self, method: str, path: str, headers: Dict[str, str], raw: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.raw = raw
        self.at = time.monotonic()
        try:
            self.body = json.loads(raw)
        except ValueError:
            self.body = None


def accepted(req: Request, index: int = 0) -> Tuple[int, Dict[str, str], Any]:
    """The answer tracegate gives a batch it stored whole."""
    b = req.body
    items = b if isinstance(b, list) else (b.get("feedback") or b.get("tool_calls") or [b])
    return 200, {}, {"accepted": len(items), "rejected": 0, "results": [{"index": i} for i in range(len(items))]}


# answer(request, index) -> (status, headers, body), or None to close the connection without an answer
Answer = Callable[[Request, int], Optional[Tuple[int, Dict[str, str], Any]]]


class Receiver:
    """A local HTTP server recording each request; `answer` decides the reply (it may block to hold a request)."""

    def __init__(self, answer: Answer = accepted, port: int = 0) -> None:
        self.requests: List[Request] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                with receiver.lock:
                    receiver.requests.append(req)
                    index = len(receiver.requests) - 1
                out = answer(req, index)
                if out is None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, headers, body = out
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        # A client gone before its answer (a timeout the test provoked) is not an error of the receiver.
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths(self) -> List[str]:
        with self.lock:
            return [r.path for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def forward(target: str, lose: Callable[[int], bool]) -> Answer:
    """An answer that forwards to a real tracegate and relays its reply, except for the requests `lose` names: those
    are stored by tracegate but their answer is lost (the connection closes)."""

    def answer(req: Request, index: int) -> Optional[Tuple[int, Dict[str, str], Any]]:
        headers = {k: v for k, v in req.headers.items() if k in ("authorization", "content-type")}
        up = urllib.request.Request(target + req.path, data=req.raw, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(up, timeout=10) as res:
                status, body = res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            status, body = e.code, json.loads(e.read() or b"{}")
        return None if lose(index) else (status, {}, body)

    return answer
