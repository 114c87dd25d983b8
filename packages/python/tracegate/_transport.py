"""One POST of one batch, and what its answer means for the batch: sent, retry later, or give up."""

import http.client
import json
import random
import socket
import urllib.error
import urllib.request
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._errors import TracegateError

ROUTES = {
    "traces": "/api/traces",
    "feedback": "/api/ingest/feedback",
    "tool_calls": "/api/ingest/tool-calls",
}

RETRYABLE = {408, 425, 429}


def batch_body(lane: str, items: List[str]) -> bytes:
    """The native route takes a JSON array; the signal routes a named list."""
    listed = "[" + ",".join(items) + "]"
    if lane == "feedback":
        listed = '{"feedback":' + listed + "}"
    elif lane == "tool_calls":
        listed = '{"tool_calls":' + listed + "}"
    return listed.encode("utf-8")


def retry_after_seconds(value: Optional[str], now: Optional[datetime] = None) -> Optional[float]:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    v = value.strip()
    try:
        return max(0.0, float(v)) if v.replace(".", "", 1).isdigit() else _until(v, now)
    except (TypeError, ValueError, OverflowError):
        return None


def _until(http_date: str, now: Optional[datetime]) -> Optional[float]:
    at = parsedate_to_datetime(http_date)
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return max(0.0, (at - (now or datetime.now(timezone.utc))).total_seconds())


def retry_delay(attempt: int, retry_after: Optional[float], base: float, cap: float, rnd=random.random) -> float:
    """The server's ``Retry-After`` when it gave one (never earlier, plus up to 10 % so clients told the same second
    do not return together), else exponential backoff with jitter (half fixed, half random); both capped at ``cap``."""
    if retry_after is not None:
        return min(cap, retry_after + retry_after * 0.1 * rnd())
    exp = min(cap, base * (2**attempt))
    return exp / 2 + exp / 2 * rnd()


class Outcome:
    """``kind``: sent | retry | split | fail."""

    __slots__ = ("kind", "error", "retry_after", "rejected")

    def __init__(self, kind: str, error=None, retry_after=None, rejected=None) -> None:
        self.kind = kind
        self.error: Optional[TracegateError] = error
        self.retry_after: Optional[float] = retry_after
        self.rejected: Optional[TracegateError] = rejected


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text or None


def _server_message(body: Any) -> str:
    e = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(e, Mapping) and isinstance(e.get("message"), str):
        return f"{e['code']}: {e['message']}" if isinstance(e.get("code"), str) else e["message"]
    return body[:200] if isinstance(body, str) else ""


def _refused(body: Any) -> Optional[Tuple[int, Any]]:
    if not isinstance(body, Mapping):
        return None
    results = body.get("results")
    failed = [r for r in results if isinstance(r, Mapping) and "error" in r] if isinstance(results, list) else []
    count = body["rejected"] if isinstance(body.get("rejected"), int) else len(failed)
    return (count, failed or body) if count > 0 else None


def classify(status: int, text: str, retry_after: Optional[str], route: str, count: int) -> Outcome:
    body = _parse(text)
    if 200 <= status < 300:
        refused = _refused(body)
        if not refused:
            return Outcome("sent")
        n, details = refused
        err = TracegateError(
            "rejected", f"{route} refused {n} of {count} items", status=status, route=route, count=n, details=details
        )
        return Outcome("sent", rejected=err)
    said = _server_message(body)
    message = f"{route} answered {status}" + (f" ({said})" if said else "")
    if status in RETRYABLE or status >= 500:
        err = TracegateError("http", message, status=status, route=route, count=count, details=body)
        return Outcome("retry", error=err, retry_after=retry_after_seconds(retry_after))
    if status == 413 and count > 1:
        return Outcome("split")
    code = "unauthorized" if status in (401, 403) else "rejected" if status == 400 else "http"
    return Outcome("fail", error=TracegateError(code, message, status=status, route=route, count=count, details=body))


def post_batch(url: str, route: str, headers: Dict[str, str], body: bytes, count: int, timeout: float) -> Outcome:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return classify(res.status, res.read().decode("utf-8", "replace"), res.headers.get("Retry-After"), route, count)
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace") if e.fp is not None else ""
        return classify(e.code, text, e.headers.get("Retry-After") if e.headers else None, route, count)
    except (socket.timeout, TimeoutError) as e:
        err = TracegateError("timeout", f"no answer from {route} within {timeout} s", route=route, count=count)
        err.__cause__ = e
        return Outcome("retry", error=err)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            err = TracegateError("timeout", f"no answer from {route} within {timeout} s", route=route, count=count)
        else:
            err = TracegateError("network", f"could not reach {route}: {reason}", route=route, count=count)
        err.__cause__ = e
        return Outcome("retry", error=err)
