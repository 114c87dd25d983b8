"""tracegate: a small client for tracegate, on the standard library only.

    from tracegate import Tracegate
    tg = Tracegate(api_key, base_url)
    trace_id = tg.trace("gpt-4o-mini", "Where is my order?", {"response": "It ships today.", "user": "u-7"})
    tg.feedback("up", trace_id=trace_id, user_id="u-7")

Calls queue and return at once; a background thread sends them in batches, retries (honouring Retry-After), and
flushes when the interpreter exits. Nothing here raises into the application: errors go to ``on_error``.
"""

from ._client import Tracegate
from ._errors import CODES, TracegateError

__version__ = "0.1.0"
__all__ = ["Tracegate", "TracegateError", "CODES", "__version__"]
