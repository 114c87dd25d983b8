"""Traces into a running tracegate: the spec's call and the keyword form as stored, batches by count and interval,
immediate mode, calls that return at once and never raise."""

import os
import time
import unittest

from tracegate import Tracegate

from .support import URL, KEY, Receiver, accepted, list_traces, need_server, read_trace, unique, wait_stored


class Traces(unittest.TestCase):
    def setUp(self):
        need_server(self)
        self.errors = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.shutdown(1.0)

    def client(self, base_url=URL, api_key=KEY, **kw):
        kw.setdefault("flush_at_exit", False)
        tg = Tracegate(api_key, base_url, on_error=self.errors.append, **kw)
        self.clients.append(tg)
        return tg

    def test_the_spec_call_is_stored_as_a_native_trace_with_source_sdk(self):
        tg = self.client(environment="prod")
        tid = tg.trace(
            "gpt-4o-mini",
            "Where is my order?",
            {"response": "It ships today.", "metrics": {"prompt_tokens": 12, "completion_tokens": 6, "latency_ms": 640}, "user": "u-7"},
        )
        self.assertRegex(tid, "^[0-9a-f]{32}$")
        self.assertTrue(tg.flush())
        wait_stored(lambda: read_trace(tid) is not None)
        t = read_trace(tid)
        span = t["spans"][0]
        for k, v in {
            "source": "sdk",
            "status": "completed",
            "model": "gpt-4o-mini",
            "prompt": "Where is my order?",
            "response": "It ships today.",
            "promptTokens": 12,
            "completionTokens": 6,
            "environment": "prod",
            "durationMs": 640,
            "requestId": tid,
            "trainable": True,
        }.items():
            self.assertEqual(span[k], v, k)
        self.assertEqual(span["attributes"]["metadata"], {"user": "u-7"})
        self.assertEqual(span["attributes"]["parameters"], {"source": "sdk"})
        self.assertEqual(self.errors, [])
        self.assertEqual(tg.stats, {"queued": 0, "sent": 1, "dropped": 0, "failed": 0, "retries": 0})

    def test_the_keyword_form_and_chat_messages_as_the_prompt(self):
        tg = self.client()
        rid = unique("order")
        self.assertEqual(
            tg.trace(
                "gpt-4o-mini",
                [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is my order?"}],
                response="It ships today.",
                metrics={"estimatedCostUsd": 0.5},
                action_name="support_reply",
                parameters={"trainingPreferred": True},
                request_id=rid,
                provider="openai",
            ),
            rid,
        )
        tg.flush()
        wait_stored(lambda: read_trace(rid) is not None)
        span = read_trace(rid)["spans"][0]
        self.assertEqual(span["prompt"], "system: Be brief.\n\nuser: Where is my order?")
        self.assertEqual((span["actionName"], span["costUsd"], span["trainingPreferred"]), ("support_reply", 0.5, True))

    def test_calls_return_at_once_and_batches_go_by_count_then_interval(self):
        r = Receiver()
        try:
            tg = self.client(r.url, "k", flush_at=10, flush_interval=60.0)
            started = time.monotonic()
            for i in range(9):
                tg.trace("m", f"p{i}")
            self.assertLess(time.monotonic() - started, 0.5)
            time.sleep(0.3)
            self.assertEqual(r.requests, [])
            tg.trace("m", "the tenth")
            wait_stored(lambda: len(r.requests) == 1, 3)
            self.assertEqual(len(r.requests[0].body), 10)
            for i in range(5):
                tg.trace("m", f"q{i}")
            time.sleep(0.3)
            self.assertEqual(tg.stats["queued"], 5)
            self.assertTrue(tg.flush())
            self.assertEqual([len(q.body) for q in r.requests], [10, 5])
            for q in r.requests:
                self.assertEqual(q.path, "/api/traces")
                self.assertEqual(q.headers["authorization"], "Bearer k")
                self.assertEqual(q.headers["content-type"], "application/json")
        finally:
            r.close()

        timed = Receiver()
        try:
            tg = self.client(timed.url, "k", flush_at=1000, flush_interval=0.2)
            for i in range(3):
                tg.trace("m", f"p{i}")
            time.sleep(0.05)
            self.assertEqual(timed.requests, [])
            wait_stored(lambda: len(timed.requests) == 1, 3)
            self.assertEqual(len(timed.requests[0].body), 3)
            # A trickle of items keeps arriving: the interval still fires.
            for i in range(4):
                tg.trace("m", f"trickle {i}")
                time.sleep(0.1)
            wait_stored(lambda: sum(len(q.body) for q in timed.requests) == 7, 3)
        finally:
            timed.close()

    def test_immediate_mode_sends_each_trace_as_it_comes(self):
        r = Receiver()
        try:
            tg = self.client(r.url, "k", export_mode="immediate", flush_interval=60.0)
            tg.trace("m", "right away")
            wait_stored(lambda: len(r.requests) == 1, 3)
            self.assertEqual(len(r.requests[0].body), 1)
        finally:
            r.close()

    def test_maximum_batch_size_and_a_413_split(self):
        r = Receiver(lambda req, i: (413, {}, {"error": {"code": "payload_too_large"}}) if len(req.body) > 4 else accepted(req))
        try:
            tg = self.client(r.url, "k", max_batch_size=10)
            for i in range(25):
                tg.trace("m", f"p{i}")
            self.assertTrue(tg.flush())
            self.assertEqual(tg.stats["sent"], 25)
            stored = [len(q.body) for q in r.requests if q.body and len(q.body) <= 4]
            self.assertEqual(sum(stored), 25)
            self.assertEqual(self.errors, [])
        finally:
            r.close()

    def test_refused_items_are_reported_and_the_valid_ones_stored(self):
        tg = self.client()
        ok = tg.trace("m", "fine", action_name=unique("refused"))
        tg.trace("m", "bad id", request_id="has spaces in it")
        tg.flush()
        self.assertEqual([(e.code, e.status, e.count) for e in self.errors], [("rejected", 207, 1)])
        self.assertIn("requestId", str(self.errors[0].details))
        wait_stored(lambda: read_trace(ok) is not None)

    def test_a_forked_child_starts_afresh_and_the_parent_keeps_its_own_queue(self):
        r = Receiver()
        try:
            tg = self.client(r.url, "k", flush_at=1000, flush_interval=60.0)
            tg.trace("m", "parent", request_id="parent")
            pid = os.fork()
            if pid == 0:  # the child: the parent's thread and lock are not its own
                try:
                    tg.trace("m", "child", request_id="child")
                    os._exit(0 if tg.flush(5) and tg.stats["sent"] == 1 else 1)
                except BaseException:
                    os._exit(2)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertTrue(tg.flush())
            sent = sorted(t["requestId"] for q in r.requests for t in q.body)
            self.assertEqual(sent, ["child", "parent"])
        finally:
            r.close()

    def test_nothing_raises_into_the_application(self):
        def raising(e):
            raise RuntimeError("the application's handler is broken")

        tg = Tracegate(KEY, URL, on_error=raising, flush_at=-1, timeout="x", flush_at_exit=False)
        self.clients.append(tg)
        cyclic = {}
        cyclic["self"] = cyclic
        tg.trace("m", "p", cyclic)
        tg.trace("m", object())
        tg.trace()
        tg.feedback()
        tg.feedback("sideways", trace_id="t")
        tg.tool_call(None)
        self.assertTrue(tg.flush())

        collected = self.client(flush_at=0)
        collected.trace("m", "p", cyclic)
        collected.tool_call("")
        self.assertEqual([e.code for e in self.errors], ["invalid_argument"] * 3)

    def test_without_a_key_nothing_is_sent(self):
        saved = os.environ.pop("TRACEGATE_API_KEY", None)
        try:
            tg = Tracegate(base_url=URL, on_error=self.errors.append)
            self.assertFalse(tg.enabled)
            self.assertRegex(tg.trace("m", "p"), "^[0-9a-f]{32}$")
            self.assertTrue(tg.flush())
            self.assertEqual([e.code for e in self.errors], ["disabled"])
        finally:
            if saved is not None:
                os.environ["TRACEGATE_API_KEY"] = saved

    def test_key_and_url_from_the_environment(self):
        saved = {k: os.environ.get(k) for k in ("TRACEGATE_API_KEY", "TRACEGATE_BASE_URL")}
        os.environ.update({"TRACEGATE_API_KEY": KEY, "TRACEGATE_BASE_URL": URL + "/"})
        try:
            tg = Tracegate(flush_at_exit=False)
            self.clients.append(tg)
            self.assertEqual(tg.base_url, URL)
            action = unique("env")
            tg.trace("m", "from the environment", action_name=action)
            tg.flush()
            wait_stored(lambda: len(list_traces(actionName=action)) == 1)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
