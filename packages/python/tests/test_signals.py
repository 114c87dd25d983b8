"""feedback() and tool_call(): the exact requests they send (to a local receiver), and what the real routes make of
them when the server has them (TRACEGATE_TEST_SIGNALS=1)."""

import re
import unittest

from tracegate import Tracegate

from .support import KEY, SIGNALS, URL, Receiver, accepted, need_server, read_trace, wait_stored

HEX32 = re.compile("^[0-9a-f]{32}$")
HEX16 = re.compile("^[0-9a-f]{16}$")


class SignalRequests(unittest.TestCase):
    def setUp(self):
        self.errors = []
        self.plan = {}
        self.r = Receiver(lambda req, i: self.plan[i] if i in self.plan else accepted(req))
        self.tg = Tracegate("tg_key_1", self.r.url, on_error=self.errors.append, flush_at_exit=False, retry_base_delay=0.02)

    def tearDown(self):
        self.tg.shutdown(0.5)
        self.r.close()

    def test_votes_in_snake_case_batched_apart_from_traces(self):
        tid = self.tg.trace("m", "p")
        self.tg.feedback("up", trace_id=tid, user_id="u-1", name="helpful", comment="spot on", source="end_user", metadata={"page": "chat"})
        self.tg.feedback(False, response_id="resp_1")
        self.tg.feedback(None, span_id="abcdef0123456789", user_id="u-1", timestamp=0)
        self.tg.feedback(-1, request_id="req-9", id="vote-7")
        self.assertTrue(self.tg.flush())
        self.assertEqual(self.errors, [])
        votes = next(q for q in self.r.requests if q.path == "/api/ingest/feedback")
        self.assertEqual(votes.headers["authorization"], "Bearer tg_key_1")
        self.assertEqual(list(votes.body), ["feedback"])
        a, b, c, d = votes.body["feedback"]
        self.assertRegex(a.pop("timestamp"), r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
        self.assertEqual(
            a,
            {"trace_id": tid, "value": "up", "name": "helpful", "comment": "spot on", "user_id": "u-1", "source": "end_user", "metadata": {"page": "chat"}},
        )
        self.assertRegex(b["id"], HEX32)
        self.assertEqual(b["value"], False)
        self.assertEqual(c, {"span_id": "abcdef0123456789", "value": None, "user_id": "u-1", "timestamp": "1970-01-01T00:00:00.000Z"})
        self.assertEqual((d["id"], d["request_id"], d["value"]), ("vote-7", "req-9", -1))
        self.assertEqual(sorted(self.r.paths()), ["/api/ingest/feedback", "/api/traces"])

    def test_tool_calls_with_the_ids_they_will_be_stored_under(self):
        tid = self.tg.trace("m", "p")
        linked = self.tg.tool_call(
            "get_weather",
            trace_id=tid,
            id="call_1",
            type="function",
            arguments={"city": "Paris"},
            result={"temp_c": 18},
            status="ok",
            started_at="2026-01-01T10:00:00.120Z",
            duration_ms=412,
            session_id="s-1",
        )
        alone = self.tg.tool_call("search", arguments='{"q":"x"}', error=TimeoutError("upstream 504"))
        by_response = self.tg.tool_call("lookup", response_id="resp_2")
        self.assertEqual(linked["trace_id"], tid)
        self.assertRegex(linked["span_id"], HEX16)
        self.assertRegex(alone["trace_id"], HEX32)
        self.assertIsNone(by_response["trace_id"])
        self.assertTrue(self.tg.flush())
        calls = next(q for q in self.r.requests if q.path == "/api/ingest/tool-calls")
        self.assertEqual(
            calls.body,
            {
                "tool_calls": [
                    {
                        "name": "get_weather",
                        "id": "call_1",
                        "type": "function",
                        "arguments": {"city": "Paris"},
                        "result": {"temp_c": 18},
                        "status": "ok",
                        "duration_ms": 412,
                        "session_id": "s-1",
                        "started_at": "2026-01-01T10:00:00.120Z",
                        "trace_id": tid,
                        "span_id": linked["span_id"],
                    },
                    {
                        "name": "search",
                        "arguments": '{"q":"x"}',
                        "error": {"type": "TimeoutError", "message": "upstream 504"},
                        "trace_id": alone["trace_id"],
                        "span_id": alone["span_id"],
                    },
                    {"name": "lookup", "response_id": "resp_2", "span_id": by_response["span_id"]},
                ]
            },
        )

    def test_a_retry_sends_the_same_bytes(self):
        self.plan[0] = (503, {"Retry-After": "0"}, {})
        self.tg.feedback("down", trace_id="t1")
        self.assertTrue(self.tg.flush())
        self.assertEqual(len(self.r.requests), 2)
        self.assertEqual(self.r.requests[0].raw, self.r.requests[1].raw)

    def test_invalid_votes_and_calls_are_reported_not_sent(self):
        self.tg.feedback("up")
        self.tg.feedback("sideways", trace_id="t")
        self.tg.feedback(None, trace_id="t")
        self.tg.tool_call("")
        self.tg.flush()
        self.assertEqual(self.r.requests, [])
        self.assertEqual([e.code for e in self.errors], ["invalid_argument"] * 4)


class SignalRoutes(unittest.TestCase):
    def setUp(self):
        need_server(self)
        if not SIGNALS:
            self.skipTest("this tracegate has no /api/ingest/feedback or /api/ingest/tool-calls yet")
        self.errors = []
        self.tg = Tracegate(KEY, URL, on_error=self.errors.append, flush_at_exit=False)

    def tearDown(self):
        self.tg.shutdown(1)
        self.assertEqual(self.errors, [])

    def test_votes_and_a_tool_call_on_a_trace(self):
        tid = self.tg.trace("gpt-4o-mini", "Weather in Paris?", {"response": "18C"})
        self.tg.flush()
        self.tg.feedback("up", trace_id=tid, user_id="u-1")
        self.tg.feedback("up", trace_id=tid, user_id="u-2")
        self.tg.feedback("down", trace_id=tid, name="accurate", comment="wrong city")
        placed = self.tg.tool_call("get_weather", trace_id=tid, id="call_1", arguments={"city": "Paris"}, result={"temp_c": 18})
        self.tg.flush()
        self.tg.feedback("down", trace_id=tid, user_id="u-1")
        self.tg.feedback(None, trace_id=tid, user_id="u-2")
        self.tg.flush()

        def settled():
            t = read_trace(tid)
            return t is not None and t.get("feedback") == {"user_feedback": {"up": 0, "down": 1}, "accurate": {"up": 0, "down": 1}} and any(
                s["spanId"] == placed["span_id"] for s in t["spans"]
            )

        wait_stored(settled)
        tool = next(s for s in read_trace(tid)["spans"] if s["spanId"] == placed["span_id"])
        self.assertEqual(tool["name"], "execute_tool get_weather")
        self.assertEqual(tool["attributes"]["gen_ai.tool.call.id"], "call_1")


if __name__ == "__main__":
    unittest.main()
