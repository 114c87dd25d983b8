"""Delivery when things go wrong: the server down or hanging, a wrong key, a 429 storm, answers lost after the server
stored the batch, a full queue, and an interpreter that exits with traces still queued."""

import os
import subprocess
import sys
import threading
import time
import unittest
from email.utils import formatdate

from tracegate import Tracegate

from .support import (
    KEY,
    LIMITED_KEY,
    LIMITED_URL,
    PACKAGE_DIR,
    URL,
    Receiver,
    accepted,
    forward,
    free_port,
    list_traces,
    need_server,
    unique,
    wait_stored,
)


class Delivery(unittest.TestCase):
    def setUp(self):
        need_server(self)
        self.errors = []
        self.clients = []
        self.receivers = []

    def tearDown(self):
        for c in self.clients:
            c.shutdown(0.5)
        for r in self.receivers:
            r.close()

    def client(self, base_url, api_key="k", **kw):
        kw.setdefault("flush_at_exit", False)
        kw.setdefault("retry_base_delay", 0.05)
        tg = Tracegate(api_key, base_url, on_error=self.errors.append, **kw)
        self.clients.append(tg)
        return tg

    def receiver(self, answer=accepted, port=0):
        r = Receiver(answer, port)
        self.receivers.append(r)
        return r

    def test_server_down_calls_return_and_flush_is_bounded(self):
        down = f"http://127.0.0.1:{free_port()}"
        tg = self.client(down, max_retries=2)
        for i in range(30):
            tg.trace("m", f"p{i}")
        tg.feedback("up", trace_id="x")
        tg.tool_call("lookup")
        started = time.monotonic()
        self.assertTrue(tg.flush(5))
        self.assertLess(time.monotonic() - started, 5)
        # The thread may have taken the first traces before the last were queued: counted per route.
        self.assertEqual({e.code for e in self.errors}, {"retries_exhausted"})
        per_route = {}
        for e in self.errors:
            per_route[e.route] = per_route.get(e.route, 0) + e.count
        self.assertEqual(per_route, {"/api/traces": 30, "/api/ingest/feedback": 1, "/api/ingest/tool-calls": 1})
        self.assertRegex(self.errors[0].message, r"could not reach /api/\S+: .*refused.*; gave up after 3 attempts")
        self.assertEqual({k: v for k, v in tg.stats.items() if k != "retries"}, {"queued": 0, "sent": 0, "dropped": 0, "failed": 32})
        self.assertEqual(tg.stats["retries"], 2 * len(self.errors))

        slow = self.client(down, retry_base_delay=60.0)
        slow.trace("m", "never sent")
        started = time.monotonic()
        self.assertFalse(slow.flush(0.3))
        self.assertLess(time.monotonic() - started, 2)
        slow.shutdown(0.3)
        self.assertLess(time.monotonic() - started, 3)
        self.assertEqual((self.errors[-1].code, self.errors[-1].count), ("shutdown", 1))

    def test_a_server_that_never_answers_times_out(self):
        hold = threading.Event()
        r = self.receiver(lambda req, i: hold.wait(5) and accepted(req))
        try:
            tg = self.client(r.url, timeout=0.2, max_retries=1)
            tg.trace("m", "p")
            started = time.monotonic()
            self.assertTrue(tg.flush(3))
            self.assertLess(time.monotonic() - started, 2.5)
            self.assertEqual([e.code for e in self.errors], ["retries_exhausted"])
            self.assertRegex(self.errors[0].message, r"no answer from /api/traces within 0.2 s")
            self.assertEqual(len(r.requests), 2)
        finally:
            hold.set()

    def test_a_wrong_key_is_reported_once_and_not_retried(self):
        tg = self.client(URL, "tg_wrong_key")
        for i in range(5):
            tg.trace("m", f"p{i}")
        tg.flush()
        self.assertEqual([(e.code, e.status, e.count) for e in self.errors], [("unauthorized", 401, 5)])
        self.assertEqual(tg.stats["retries"], 0)

    def test_a_429_storm_from_tracegate_every_trace_stored_once(self):
        if not LIMITED_URL:
            self.skipTest("no rate-limited tracegate given (TRACEGATE_TEST_LIMITED_URL)")
        tg = self.client(LIMITED_URL, LIMITED_KEY, flush_at=5, max_batch_size=5, max_retries=10)
        action = unique("storm")
        ids = {tg.trace("m", f"storm {i}", action_name=action) for i in range(30)}
        self.assertTrue(tg.flush(60))
        self.assertEqual(self.errors, [])
        self.assertGreater(tg.stats["retries"], 0)
        self.assertEqual(tg.stats["sent"], 30)
        wait_stored(lambda: len(list_traces(LIMITED_URL, LIMITED_KEY, actionName=action)) == 30)
        self.assertEqual({t["traceId"] for t in list_traces(LIMITED_URL, LIMITED_KEY, actionName=action)}, ids)

    def test_retry_after_as_a_date_and_as_seconds_is_waited_for_and_capped(self):
        plan = [
            (503, {"Retry-After": formatdate(time.time() + 2, usegmt=True)}, {}),
            (429, {"Retry-After": "1"}, {}),
            (429, {"Retry-After": "3600"}, {}),
        ]
        r = self.receiver(lambda req, i: plan[i] if i < len(plan) else accepted(req))
        tg = self.client(r.url, retry_max_delay=1.5)
        tg.trace("m", "p")
        self.assertTrue(tg.flush(15))
        self.assertEqual(len(r.requests), 4)
        gaps = [b.at - a.at for a, b in zip(r.requests, r.requests[1:])]
        self.assertGreaterEqual(gaps[0], 1.0)  # an HTTP date has whole seconds
        self.assertLess(gaps[0], 3.0)
        self.assertGreaterEqual(gaps[1], 1.0)
        self.assertLess(gaps[1], 1.8)
        self.assertGreaterEqual(gaps[2], 1.45)  # 3600 s capped at 1.5 s
        self.assertLess(gaps[2], 2.3)
        self.assertEqual(tg.stats["retries"], 3)

    def test_5xx_backs_off_then_the_batch_is_given_up(self):
        r = self.receiver(lambda req, i: (502, {}, {"error": {"code": "bad_gateway", "message": "upstream"}}))
        tg = self.client(r.url, max_retries=3, retry_base_delay=0.1)
        tg.trace("m", "p")
        tg.flush(10)
        self.assertEqual(len(r.requests), 4)
        gaps = [b.at - a.at for a, b in zip(r.requests, r.requests[1:])]
        for gap, low in zip(gaps, (0.05, 0.1, 0.2)):
            self.assertGreaterEqual(gap, low - 0.01)
        self.assertEqual(
            [(e.code, e.status, e.message) for e in self.errors],
            [("retries_exhausted", 502, "/api/traces answered 502 (bad_gateway: upstream); gave up after 4 attempts")],
        )

    def test_an_answer_lost_after_the_server_stored_the_batch_is_not_a_duplicate(self):
        lossy = self.receiver(forward(URL, lambda i: i in (0, 2)))
        tg = self.client(lossy.url, KEY, max_batch_size=10)
        action = unique("lossy")
        ids = {tg.trace("m", f"lossy {i}", action_name=action) for i in range(20)}
        self.assertTrue(tg.flush(20))
        self.assertEqual(self.errors, [])
        self.assertEqual(len(lossy.requests), 4)
        self.assertEqual((tg.stats["sent"], tg.stats["retries"]), (20, 2))
        wait_stored(lambda: len(list_traces(actionName=action)) >= 20)
        time.sleep(0.3)
        stored = [t["traceId"] for t in list_traces(actionName=action)]
        self.assertEqual(sorted(stored), sorted(ids))

    def test_a_server_that_comes_back_gets_what_was_queued(self):
        port = free_port()
        tg = self.client(f"http://127.0.0.1:{port}", max_retries=30, retry_base_delay=0.1, retry_max_delay=0.4)
        ids = [tg.trace("m", f"outage {i}") for i in range(7)]
        time.sleep(0.5)
        self.assertEqual((tg.stats["sent"], tg.stats["queued"]), (0, 7))
        back = self.receiver(port=port)
        self.assertTrue(tg.flush(10))
        self.assertEqual([t["requestId"] for q in back.requests for t in q.body], ids)

    def test_a_full_queue_drops_the_oldest_and_counts_them(self):
        release = threading.Event()
        r = self.receiver(lambda req, i: (release.wait(10) if i == 0 else True) and accepted(req))
        tg = self.client(r.url, flush_at=1, max_queue_size=10)
        tg.trace("m", "first", request_id="first")
        wait_stored(lambda: len(r.requests) == 1, 3)
        for i in range(50):
            tg.trace("m", f"p{i}", request_id=f"n{i}")
        self.assertEqual((tg.stats["dropped"], tg.stats["queued"]), (40, 11))
        self.assertEqual(sum(e.count for e in self.errors if e.code == "queue_full"), 40)
        release.set()
        self.assertTrue(tg.flush())
        delivered = [t["requestId"] for q in r.requests for t in q.body]
        self.assertEqual(delivered, ["first"] + [f"n{i}" for i in range(40, 50)])

    def _exit_child(self, url, key, count, flush_timeout=10.0):
        action = unique("exit")
        # The client lives in a function the program has left (and collected): what it queued is still delivered.
        script = (
            "import gc, sys\n"
            "from tracegate import Tracegate\n"
            "def handle():\n"
            f"    tg = Tracegate({key!r}, {url!r}, flush_at=50, flush_interval=60.0, flush_timeout={flush_timeout},\n"
            "                   retry_base_delay=0.1, on_error=lambda e: print('error', e.code, e.count, file=sys.stderr))\n"
            f"    for i in range({count}):\n"
            f"        tg.trace('gpt-4o-mini', 'exit prompt %d' % i, {{'response': 'answer %d' % i}}, action_name={action!r})\n"
            "handle()\n"
            "gc.collect()\n"
        )
        env = {**os.environ, "PYTHONPATH": PACKAGE_DIR}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        return done, time.monotonic() - started, action

    def test_an_interpreter_exiting_with_a_full_queue_delivers_every_trace(self):
        done, _, action = self._exit_child(URL, KEY, 1500)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("error", done.stderr)
        wait_stored(lambda: len(list_traces(actionName=action)) == 1500, 20)
        self.assertTrue(all(t["source"] == "sdk" for t in list_traces(actionName=action)))

    def test_an_interpreter_exiting_while_the_server_is_down_waits_at_most_flush_timeout(self):
        done, took, _ = self._exit_child(f"http://127.0.0.1:{free_port()}", "k", 10, flush_timeout=1.5)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertGreaterEqual(took, 1.4)
        self.assertLess(took, 10)
        self.assertIn("error shutdown 10", done.stderr)


if __name__ == "__main__":
    unittest.main()
