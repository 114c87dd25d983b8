"""The wire shapes: a native trace for POST /api/traces, a vote for /api/ingest/feedback, a tool call for
/api/ingest/tool-calls. Pure: ids and times come in from the caller."""

import json
import secrets
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

Json = Dict[str, Any]


def new_trace_id() -> str:
    """32 lowercase hex: the W3C trace-id shape, and the native ``requestId`` (a retried batch replaces, never duplicates)."""
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


def _drop_none(d: Json) -> Json:
    return {k: v for k, v in d.items() if v is not None}


# Python callers write metrics in snake_case; the wire is the spec's camelCase.
_METRIC_NAMES = {
    "prompt_tokens": "promptTokens",
    "completion_tokens": "completionTokens",
    "total_tokens": "totalTokens",
    "latency_ms": "latencyMs",
    "estimated_cost_usd": "estimatedCostUsd",
    "finish_reason": "finishReason",
}


def wire_metrics(metrics: Optional[Mapping[str, Any]]) -> Optional[Json]:
    if not isinstance(metrics, Mapping):
        return None
    return {_METRIC_NAMES.get(k, k): v for k, v in metrics.items()}


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [c.get("text") for c in content if isinstance(c, Mapping) and isinstance(c.get("text"), str)]
    return "\n".join(t for t in texts if t)


def prompt_text(value: Any) -> Optional[str]:
    """A prompt as the native trace stores it: text as is; chat messages as ``role: text`` blocks (one user
    message is its text, as tracegate's proxy renders a request); anything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: List[Tuple[str, str]] = []
        for m in value:
            if isinstance(m, str) and m:
                parts.append(("user", m))
            elif isinstance(m, Mapping):
                text = _content_text(m.get("content"))
                if text:
                    parts.append((str(m.get("role") or "user"), text))
        if len(parts) == 1 and parts[0][0] == "user":
            return parts[0][1]
        return "\n\n".join(f"{role}: {text}" for role, text in parts)
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def trace_payload(
    *,
    request_id: str,
    model: Any = None,
    prompt: Any = None,
    metadata: Optional[Mapping[str, Any]] = None,
    response: Any = None,
    metrics: Optional[Mapping[str, Any]] = None,
    action_name: Optional[str] = None,
    environment: Optional[str] = None,
    parameters: Optional[Mapping[str, Any]] = None,
    status: Optional[str] = None,
    provider: Optional[str] = None,
) -> Json:
    """The native payload. A ``response`` or ``metrics`` inside ``metadata`` fill those fields (the spec's call)."""
    meta = dict(metadata) if isinstance(metadata, Mapping) else None
    if meta is not None:
        if response is None and meta.get("response") is not None:
            response = meta.pop("response")
        if metrics is None and isinstance(meta.get("metrics"), Mapping):
            metrics = meta.pop("metrics")
        if not meta:
            meta = None
    if response is not None and not isinstance(response, str):
        response = prompt_text(response)
    return _drop_none(
        {
            "requestId": request_id,
            "actionName": action_name,
            "environment": environment,
            "status": status,
            "model": None if model is None else str(model),
            "provider": provider,
            "prompt": prompt_text(prompt),
            "response": response,
            "metrics": wire_metrics(metrics),
            "parameters": {"source": "sdk", **(dict(parameters) if isinstance(parameters, Mapping) else {})},
            "metadata": meta,
        }
    )


Timestamp = Union[datetime, str, int, float]


def iso_time(v: Optional[Timestamp]) -> Optional[str]:
    """A time on the wire: ISO 8601. Numbers are epoch seconds (Python's ``time.time()``); strings are sent as given."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        v = datetime.fromtimestamp(v, tz=timezone.utc)
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.astimezone()  # a naive time is local time, as datetime.now() gives it
        return v.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None


_VOTE_VALUES = ("up", "down", True, False, 1, 0, -1, None)


def _is_vote(value: Any) -> bool:
    # True == 1 in Python: compare type and value so that 1.5 or "1" do not pass.
    return any(type(value) is type(v) and value == v for v in _VOTE_VALUES)


def feedback_payload(args: Mapping[str, Any], new_id: Callable[[], str], now: datetime) -> Union[Json, str]:
    """A vote on the wire, or why it cannot be one. Without a user each vote counts on the server, so the SDK gives
    it an id (a retried batch then does not count it twice); with a user the server keeps one vote per user, and an
    id would make each change of mind a vote of its own. A retraction (None) names the vote by its id or user."""
    if not any(args.get(k) for k in ("trace_id", "span_id", "response_id", "request_id")):
        return "feedback needs a target: trace_id, span_id, response_id or request_id"
    if "value" not in args:
        return "feedback needs a value: up, down, True, False, 1, 0, -1, or None to retract"
    value = args["value"]
    if not _is_vote(value):
        return f"feedback value must be up, down, True, False, 1, 0, -1 or None (to retract), not {value!r}"
    if value is None and not args.get("id") and not args.get("user_id"):
        return "None retracts a vote, which needs its id or user_id to name it"
    body = {k: args.get(k) for k in ("trace_id", "span_id", "response_id", "request_id")}
    body.update(
        {
            "id": args.get("id") or (None if args.get("user_id") or value is None else new_id()),
            "value": value,
            "name": args.get("name"),
            "comment": args.get("comment"),
            "user_id": args.get("user_id"),
            "source": args.get("source"),
            "metadata": args.get("metadata"),
            "timestamp": iso_time(args.get("timestamp")) or iso_time(now),
        }
    )
    out = _drop_none(body)
    out["value"] = value  # None retracts: it must be sent
    return out


def _tool_error(e: Any) -> Optional[Json]:
    if e is None:
        return None
    if isinstance(e, BaseException):
        return {"type": type(e).__name__, "message": str(e)}
    if isinstance(e, Mapping):
        return _drop_none({"type": e.get("type"), "message": e.get("message"), "data": e.get("data")})
    return {"message": str(e)}


_TOOL_FIELDS = (
    "id",
    "type",
    "description",
    "arguments",
    "result",
    "status",
    "duration_ms",
    "traceparent",
    "parent_span_id",
    "response_id",
    "session_id",
    "user_id",
    "metadata",
)


def tool_call_payload(
    args: Mapping[str, Any], new_trace: Callable[[], str], new_span: Callable[[], str]
) -> Union[Tuple[Json, Optional[str], str], str]:
    """A tool call on the wire with the ids it will be stored under, or why it cannot be one."""
    name = args.get("name")
    if not isinstance(name, str) or not name:
        return "a tool call needs a name"
    span_id = args.get("span_id") or new_span()
    # A call linked to nothing starts a trace of its own: its id is chosen here so a retry lands in the same one.
    trace_id = args.get("trace_id") or (None if args.get("traceparent") or args.get("response_id") else new_trace())
    body: Json = {"name": name}
    body.update({k: args.get(k) for k in _TOOL_FIELDS})
    body.update(
        {
            "error": _tool_error(args.get("error")),
            "started_at": iso_time(args.get("started_at")),
            "ended_at": iso_time(args.get("ended_at")),
            "trace_id": trace_id,
            "span_id": span_id,
        }
    )
    return _drop_none(body), trace_id, span_id
