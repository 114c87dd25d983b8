"""What went wrong, as the SDK reports it to ``on_error``. The SDK never raises these into the application."""

from typing import Any, Optional

#: The codes, as in the TypeScript SDK.
CODES = (
    "disabled",  # no API key: nothing is sent
    "invalid_argument",  # a call could not make a valid item (no target for a vote, a tool call without a name)
    "queue_full",  # the queue was full: the oldest items were dropped (``count`` of them)
    "network",  # the server could not be reached, or the connection broke
    "timeout",  # no answer within ``timeout`` seconds
    "unauthorized",  # 401 or 403: the key is missing, wrong or revoked; not retried
    "rejected",  # the server refused items (validation); ``details`` holds its answer; not retried
    "http",  # any other answer retrying cannot fix (404 on a server without the route, 413 for one item, 415)
    "retries_exhausted",  # a retryable failure (network, 408, 425, 429, 5xx) persisted past ``max_retries``
    "shutdown",  # items still queued when ``shutdown()`` or the exit flush ran out of time were dropped
    "internal",  # a defect in the SDK, caught so that it cannot reach the application
)


class TracegateError(Exception):
    """An error the SDK hands to ``on_error``: ``code`` (see ``CODES``), ``status``, ``count``, ``route``, ``details``."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: Optional[int] = None,
        count: int = 0,
        route: Optional[str] = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.count = count
        self.route = route
        self.details = details

    def __repr__(self) -> str:
        return f"TracegateError({self.code!r}, {self.message!r}, status={self.status!r}, count={self.count!r})"
