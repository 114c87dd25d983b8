"""Sends the queue off the application's thread: a background thread batches by count (``flush_at``) and by time
(``flush_interval``), sends one request at a time, retries with backoff, and ``flush()`` waits a bounded time
whatever the server does."""

import os
import threading
import time
from collections import deque
from typing import Callable, Deque, Dict, List, Optional, Tuple

from ._errors import TracegateError
from ._transport import ROUTES, batch_body, post_batch, retry_delay

LANES = ("traces", "feedback", "tool_calls")

# (sequence number, serialised item, its size in bytes)
Item = Tuple[int, str, int]


class Exporter:
    def __init__(
        self,
        *,
        base_url: str,
        headers: Dict[str, str],
        flush_at: int,
        flush_interval: float,
        max_queue_size: int,
        max_batch_size: int,
        max_batch_bytes: int,
        timeout: float,
        max_retries: int,
        retry_base_delay: float,
        retry_max_delay: float,
        flush_timeout: float,
        immediate: bool,
        report: Callable[[TracegateError], None],
    ) -> None:
        self.base_url = base_url
        self.headers = headers
        self.flush_at = flush_at
        self.flush_interval = flush_interval
        self.max_queue_size = max_queue_size
        self.max_batch_size = max_batch_size
        self.max_batch_bytes = max_batch_bytes
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.flush_timeout = flush_timeout
        self.immediate = immediate
        self.report = report
        self.counts = {"sent": 0, "dropped": 0, "failed": 0, "retries": 0}
        self._reset()

    def _reset(self) -> None:
        """Fresh state for this process (also in a child after fork: the parent's thread and lock are not ours)."""
        self._pid = os.getpid()
        self._cond = threading.Condition(threading.Lock())
        self._lanes: Dict[str, Deque[Item]] = {lane: deque() for lane in LANES}
        self._size = 0
        self._seq = 0
        self._urgent_up_to = 0
        self._in_flight: List[Item] = []
        self._stop = threading.Event()
        self._closed = False
        self._thread: Optional[threading.Thread] = None

    # ---- called by the application's threads

    def enqueue(self, lane: str, json_text: str) -> None:
        if self._pid != os.getpid():
            self._reset()
        dropped = 0
        with self._cond:
            if self._closed:
                self.counts["failed"] += 1
                closed = True
            else:
                closed = False
                self._seq += 1
                self._lanes[lane].append((self._seq, json_text, len(json_text.encode("utf-8"))))
                self._size += 1
                while self._size > self.max_queue_size:
                    self._drop_oldest()
                    dropped += 1
                if self.immediate:
                    self._urgent_up_to = self._seq
                self._ensure_thread()
                self._cond.notify_all()
        if closed:
            self.report(TracegateError("shutdown", "the client is shut down: item not sent", count=1))
        if dropped:
            self.report(
                TracegateError(
                    "queue_full",
                    f"queue full ({self.max_queue_size}): dropped the {dropped} oldest items",
                    count=dropped,
                )
            )

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until everything queued before the call is sent or given up, or ``timeout`` seconds. True when done."""
        if self._pid != os.getpid():
            return True
        limit = self.flush_timeout if timeout is None else timeout
        with self._cond:
            target = self._seq
            if self._settled_up_to(target):
                return True
            self._urgent_up_to = max(self._urgent_up_to, target)
            self._ensure_thread()
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._settled_up_to(target), timeout=max(0.0, limit))

    def shutdown(self, timeout: Optional[float] = None) -> None:
        """flush(), then stop the thread; what is still unsent after ``timeout`` seconds is dropped and reported."""
        with self._cond:
            if self._closed:
                return
        limit = self.flush_timeout if timeout is None else max(0.0, timeout)
        deadline = time.monotonic() + limit
        self.flush(limit)
        with self._cond:
            self._closed = True
            left = self._drain()
            self._stop.set()
            self._cond.notify_all()
            thread = self._thread
        if left:
            self._give(len(left), TracegateError("shutdown", f"{len(left)} items unsent at shutdown"))
        # A batch out when the time ran out is given up by the thread (its backoff wait ends at once); waiting a
        # moment for that lets it be reported before the interpreter exits. A request still blocked on the network
        # holds the thread until its own timeout: the wait does not.
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()) + 0.2)

    @property
    def queued(self) -> int:
        with self._cond:
            return self._size + len(self._in_flight)

    # ---- under the lock

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="tracegate-exporter", daemon=True)
            self._thread.start()

    def _drop_oldest(self) -> None:
        lane = min((l for l in LANES if self._lanes[l]), key=lambda l: self._lanes[l][0][0])
        self._lanes[lane].popleft()
        self._size -= 1
        self.counts["dropped"] += 1

    def _settled_up_to(self, seq: int) -> bool:
        heads = [q[0][0] for q in self._lanes.values() if q]
        if self._in_flight:
            heads.append(self._in_flight[0][0])
        return not heads or min(heads) > seq

    def _next_lane(self, tick: bool) -> Optional[str]:
        best: Optional[Tuple[int, str]] = None
        for lane in LANES:
            q = self._lanes[lane]
            if not q:
                continue
            seq = q[0][0]
            if (tick or seq <= self._urgent_up_to or len(q) >= self.flush_at) and (best is None or seq < best[0]):
                best = (seq, lane)
        return best[1] if best else None

    def _take(self, lane: str) -> List[Item]:
        q = self._lanes[lane]
        out: List[Item] = []
        size = 0
        while q and len(out) < self.max_batch_size and (not out or size + q[0][2] <= self.max_batch_bytes):
            item = q.popleft()
            out.append(item)
            size += item[2]
        self._size -= len(out)
        return out

    def _drain(self) -> List[Item]:
        out: List[Item] = []
        for q in self._lanes.values():
            out.extend(q)
            q.clear()
        self._size = 0
        return out

    # ---- the background thread

    def _run(self) -> None:
        tick = False
        next_tick = time.monotonic() + self.flush_interval
        while not self._stop.is_set():
            with self._cond:
                now = time.monotonic()
                if now >= next_tick:
                    # The interval passed: everything queued goes, whatever flush_at says.
                    tick = True
                    next_tick = now + self.flush_interval
                lane = self._next_lane(tick)
                if lane is None:
                    tick = False
                    self._cond.wait(timeout=max(0.0, next_tick - now))  # a new item or a flush wakes it early
                    continue
                batch = self._take(lane)
                self._in_flight = batch
            try:
                self._deliver(lane, batch)
            except Exception as e:  # never let the thread die on a defect
                self._give(len(batch), TracegateError("internal", f"tracegate SDK defect: {e!r}", count=len(batch)))
            with self._cond:
                self._in_flight = []
                self._cond.notify_all()

    def _deliver(self, lane: str, batch: List[Item]) -> None:
        route = ROUTES[lane]
        body = batch_body(lane, [i[1] for i in batch])
        attempt = 0
        while True:
            if self._stop.is_set():
                return self._give(len(batch), TracegateError("shutdown", "shut down before sending"))
            out = post_batch(self.base_url + route, route, self.headers, body, len(batch), self.timeout)
            if out.kind == "sent":
                refused = out.rejected.count if out.rejected else 0
                with self._cond:
                    self.counts["sent"] += len(batch) - refused
                    self.counts["failed"] += refused
                if out.rejected:
                    self.report(out.rejected)
                return
            if out.kind == "split":
                # 413: larger than the server takes; halves until one item alone is refused.
                half = (len(batch) + 1) // 2
                self._deliver(lane, batch[:half])
                self._deliver(lane, batch[half:])
                return
            err = out.error
            assert err is not None
            if out.kind == "fail":
                return self._give(len(batch), err)
            if attempt >= self.max_retries:
                message = f"{err.message}; gave up after {attempt + 1} attempts"
                exhausted = TracegateError(
                    "retries_exhausted", message, status=err.status, route=route, count=len(batch), details=err.details
                )
                exhausted.__cause__ = err
                return self._give(len(batch), exhausted)
            with self._cond:
                self.counts["retries"] += 1
            # A shutdown cuts the wait short.
            self._stop.wait(retry_delay(attempt, out.retry_after, self.retry_base_delay, self.retry_max_delay))
            attempt += 1

    def _give(self, n: int, err: TracegateError) -> None:
        with self._cond:
            self.counts["failed"] += n
        if err.count != n:
            err.count = n
        self.report(err)
