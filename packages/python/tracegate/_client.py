"""The Tracegate client: what the application calls. Every public method returns at once and never raises: items
are queued for a background thread, and anything that goes wrong reaches ``on_error``."""

import atexit
import json
import logging
import os
import threading
import time
import weakref
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Mapping, Optional
from urllib.parse import urlparse

from ._errors import TracegateError
from ._exporter import Exporter
from ._payloads import (
    feedback_payload,
    new_span_id,
    new_trace_id,
    tool_call_payload,
    trace_payload,
)

__all__ = ["Tracegate"]

log = logging.getLogger("tracegate")

DEFAULT_BASE_URL = "http://localhost:4318"
_MISSING: Any = object()


def _default_on_error() -> Callable[[TracegateError], None]:
    """A log warning per kind of error at most once a minute: an outage must not flood the application's log."""
    last: Dict[str, float] = {}
    lock = threading.Lock()

    def warn(e: TracegateError) -> None:
        now = time.monotonic()
        with lock:
            if now - last.get(e.code, -1e9) < 60:
                return
            last[e.code] = now
        log.warning("tracegate %s: %s", e.code, e.message)

    return warn


def _positive(name: str, value: Any, default: float, zero_ok: bool, report) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value > 0 or (zero_ok and value == 0))
    if value is not None and not ok:
        report(TracegateError("invalid_argument", f"{name} must be a positive number; using {default}"))
    return value if ok else default


class Tracegate:
    """A tracegate client.

    ``Tracegate(api_key, base_url)``; both default to ``TRACEGATE_API_KEY`` and ``TRACEGATE_BASE_URL``
    (else ``http://localhost:4318``). Without a key it sends nothing (one warning). Times are in seconds.
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        flush_at: int = 20,
        flush_interval: float = 1.0,
        max_queue_size: int = 10_000,
        max_batch_size: int = 100,
        max_batch_bytes: int = 1024 * 1024,
        timeout: float = 10.0,
        max_retries: int = 5,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        flush_timeout: float = 10.0,
        export_mode: str = "batched",
        flush_at_exit: bool = True,
        action_name: Optional[str] = None,
        environment: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        on_error: Optional[Callable[[TracegateError], None]] = None,
    ) -> None:
        handler = on_error if callable(on_error) else _default_on_error()

        def report(e: TracegateError) -> None:
            try:
                handler(e)
            except Exception:  # the application's handler must not break the SDK either
                pass

        self._report = report
        self._defaults = {"action_name": action_name, "environment": environment}
        self.base_url = str(base_url or os.environ.get("TRACEGATE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("TRACEGATE_API_KEY")
        self.flush_timeout = _positive("flush_timeout", flush_timeout, 10.0, True, report)
        self._exporter: Optional[Exporter] = None
        try:
            given = {
                "headers": headers,
                "flush_at": flush_at,
                "flush_interval": flush_interval,
                "max_queue_size": max_queue_size,
                "max_batch_size": max_batch_size,
                "max_batch_bytes": max_batch_bytes,
                "timeout": timeout,
                "max_retries": max_retries,
                "retry_base_delay": retry_base_delay,
                "retry_max_delay": retry_max_delay,
                "export_mode": export_mode,
            }
            self._exporter = self._start(key, given)
        except Exception as e:
            report(TracegateError("internal", f"tracegate SDK defect in Tracegate(): {e!r}"))
        self.enabled = self._exporter is not None
        if self._exporter is not None and flush_at_exit:
            _at_exit(self._exporter)

    def _start(self, key: Optional[str], given: Dict[str, Any]) -> Optional[Exporter]:
        if not key:
            self._report(TracegateError("disabled", "no API key (api_key or TRACEGATE_API_KEY): nothing is sent"))
            return None
        if urlparse(self.base_url).scheme not in ("http", "https"):
            self._report(TracegateError("disabled", f"cannot send to {self.base_url!r}: not http(s); nothing is sent"))
            return None
        r = self._report
        return Exporter(
            base_url=self.base_url,
            headers={
                **{str(k): str(v) for k, v in (given["headers"] or {}).items()},
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "User-Agent": "tracegate-python/0.1.0",
            },
            flush_at=int(_positive("flush_at", given["flush_at"], 20, False, r)),
            flush_interval=_positive("flush_interval", given["flush_interval"], 1.0, False, r),
            max_queue_size=int(_positive("max_queue_size", given["max_queue_size"], 10_000, False, r)),
            max_batch_size=int(_positive("max_batch_size", given["max_batch_size"], 100, False, r)),
            max_batch_bytes=int(_positive("max_batch_bytes", given["max_batch_bytes"], 1024 * 1024, False, r)),
            timeout=_positive("timeout", given["timeout"], 10.0, False, r),
            max_retries=int(_positive("max_retries", given["max_retries"], 5, True, r)),
            retry_base_delay=_positive("retry_base_delay", given["retry_base_delay"], 0.5, True, r),
            retry_max_delay=_positive("retry_max_delay", given["retry_max_delay"], 30.0, True, r),
            flush_timeout=self.flush_timeout,
            immediate=given["export_mode"] == "immediate",
            report=r,
        )

    def trace(
        self,
        model: Any = None,
        input: Any = None,
        metadata: Optional[Mapping[str, Any]] = None,
        *,
        prompt: Any = None,
        response: Any = None,
        metrics: Optional[Mapping[str, Any]] = None,
        action_name: Optional[str] = None,
        environment: Optional[str] = None,
        parameters: Optional[Mapping[str, Any]] = None,
        request_id: Optional[str] = None,
        status: Optional[str] = None,
        provider: Optional[str] = None,
    ) -> str:
        """Records one completion: ``trace(model, input, metadata)`` as the spec calls it (``input`` the prompt; a
        ``response`` or ``metrics`` in ``metadata`` fill those fields), or with the keyword arguments. ``metrics``
        takes the spec's names or snake_case (``prompt_tokens``, ``latency_ms``…). Returns the trace id (the native
        ``requestId``): give it to ``feedback()`` and ``tool_call()``."""
        rid = request_id if isinstance(request_id, str) and request_id else new_trace_id()
        try:
            body = trace_payload(
                request_id=rid,
                model=model,
                prompt=prompt if prompt is not None else input,
                metadata=metadata,
                response=response,
                metrics=metrics,
                action_name=action_name or self._defaults["action_name"],
                environment=environment or self._defaults["environment"],
                parameters=parameters,
                status=status,
                provider=provider,
            )
            self._send("traces", body)
        except Exception as e:
            self._internal("trace", e)
        return rid

    def feedback(
        self,
        value: Any = _MISSING,
        *,
        trace_id: Optional[str] = None,
        span_id: Optional[str] = None,
        response_id: Optional[str] = None,
        request_id: Optional[str] = None,
        name: Optional[str] = None,
        comment: Optional[str] = None,
        user_id: Optional[str] = None,
        source: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        timestamp: Any = None,
        id: Optional[str] = None,
    ) -> None:
        """A thumbs-up/down about a trace (or span, provider response, request): ``value`` up/down, True/False,
        1/0/-1, or None to retract. With a ``user_id`` one vote per user stands; ``id`` makes it an upsert."""
        try:
            args = dict(locals())
            args.pop("self")
            if value is _MISSING:
                args.pop("value")
            body = feedback_payload(args, new_trace_id, datetime.now(timezone.utc))
            if isinstance(body, str):
                self._report(TracegateError("invalid_argument", body, count=1))
                return
            self._send("feedback", body)
        except Exception as e:
            self._internal("feedback", e)

    def tool_call(
        self,
        name: str,
        *,
        id: Optional[str] = None,
        type: Optional[str] = None,
        description: Optional[str] = None,
        arguments: Any = None,
        result: Any = None,
        error: Any = None,
        status: Optional[str] = None,
        started_at: Any = None,
        ended_at: Any = None,
        duration_ms: Optional[float] = None,
        trace_id: Optional[str] = None,
        traceparent: Optional[str] = None,
        parent_span_id: Optional[str] = None,
        span_id: Optional[str] = None,
        response_id: Optional[str] = None,
        session_id: Optional[str] = None,
        user_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Optional[str]]:
        """A tool the application ran. ``error`` may be an exception or ``{type, message, data}``; times are
        datetimes, ISO strings or epoch seconds. Returns ``{"trace_id", "span_id"}`` it will be stored under
        (``trace_id`` None when linked by ``traceparent`` or ``response_id``)."""
        try:
            args = dict(locals())
            args.pop("self")
            out = tool_call_payload(args, new_trace_id, new_span_id)
            if isinstance(out, str):
                self._report(TracegateError("invalid_argument", out, count=1))
                return {"trace_id": None, "span_id": None}
            body, tid, sid = out
            self._send("tool_calls", body)
            return {"trace_id": tid, "span_id": sid}
        except Exception as e:
            self._internal("tool_call", e)
            return {"trace_id": None, "span_id": None}

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until everything queued so far is sent or given up, at most ``timeout`` seconds (default
        ``flush_timeout``). True when it all settled in time. Never raises."""
        try:
            return self._exporter.flush(timeout) if self._exporter else True
        except Exception as e:
            self._internal("flush", e)
            return False

    def shutdown(self, timeout: Optional[float] = None) -> None:
        """flush(), then stop the thread; what is still unsent after ``timeout`` seconds is dropped and reported."""
        try:
            if self._exporter:
                self._exporter.shutdown(timeout)
        except Exception as e:
            self._internal("shutdown", e)

    @property
    def stats(self) -> Dict[str, int]:
        """``queued``, ``sent``, ``dropped`` (queue full), ``failed`` (given up), ``retries``."""
        if not self._exporter:
            return {"queued": 0, "sent": 0, "dropped": 0, "failed": 0, "retries": 0}
        return {"queued": self._exporter.queued, **self._exporter.counts}

    def _send(self, lane: str, body: Any) -> None:
        if not self._exporter:
            return
        try:
            text = json.dumps(body, default=_json_default, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            self._report(TracegateError("invalid_argument", f"not serialisable as JSON: {e}", count=1))
            return
        self._exporter.enqueue(lane, text)

    def _internal(self, where: str, e: BaseException) -> None:
        self._report(TracegateError("internal", f"tracegate SDK defect in {where}: {e!r}"))


def _json_default(v: Any) -> Any:
    """Values JSON has no type for: times as ISO strings, sets as lists, anything else as its str()."""
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


_exporters: "weakref.WeakSet[Exporter]" = weakref.WeakSet()
_registered = False


def _at_exit(exporter: Exporter) -> None:
    """One atexit hook for every client. It holds the exporters (which their thread keeps alive while it runs), not
    the clients: a client the application dropped still delivers what it queued."""
    global _registered
    _exporters.add(exporter)
    if not _registered:
        _registered = True
        atexit.register(_flush_all)


def _flush_all() -> None:
    for e in list(_exporters):
        try:
            e.shutdown(e.flush_timeout)
        except Exception:  # never let one client's failure stop the others, or the exit
            pass
