"""The pure parts: wire payloads, Retry-After and backoff, answer classification."""

import unittest
from datetime import datetime, timedelta, timezone

from tracegate._payloads import (
    feedback_payload,
    iso_time,
    new_span_id,
    new_trace_id,
    prompt_text,
    tool_call_payload,
    trace_payload,
)
from tracegate._transport import batch_body, classify, retry_after_seconds, retry_delay

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


class TracePayload(unittest.TestCase):
    def test_the_spec_call_lifts_response_and_metrics_out_of_metadata(self):
        body = trace_payload(
            request_id="r1",
            model="gpt-4o-mini",
            prompt="Where is my order?",
            metadata={"response": "It ships today.", "metrics": {"prompt_tokens": 12, "latencyMs": 640}, "user": "u-7"},
            environment="prod",
        )
        self.assertEqual(
            body,
            {
                "requestId": "r1",
                "environment": "prod",
                "model": "gpt-4o-mini",
                "prompt": "Where is my order?",
                "response": "It ships today.",
                "metrics": {"promptTokens": 12, "latencyMs": 640},
                "parameters": {"source": "sdk"},
                "metadata": {"user": "u-7"},
            },
        )

    def test_source_is_sdk_unless_named_and_an_empty_metadata_is_left_out(self):
        body = trace_payload(request_id="r", metadata={"response": "x"}, parameters={"trainingPreferred": True})
        self.assertEqual(body["parameters"], {"source": "sdk", "trainingPreferred": True})
        self.assertNotIn("metadata", body)
        self.assertEqual(trace_payload(request_id="r", parameters={"source": "coach"})["parameters"], {"source": "coach"})

    def test_prompts_render_as_the_proxy_renders_them(self):
        self.assertEqual(prompt_text([{"role": "user", "content": "hi"}]), "hi")
        self.assertEqual(
            prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "a"}]}]),
            "system: Be brief.\n\nuser: a",
        )
        self.assertEqual(prompt_text({"q": 1}), '{"q": 1}')
        self.assertIsNone(prompt_text(None))


class SignalPayloads(unittest.TestCase):
    def test_a_vote_without_a_user_gets_an_id_with_a_user_none(self):
        self.assertEqual(
            feedback_payload({"trace_id": "t", "value": "up"}, lambda: "gen", NOW),
            {"trace_id": "t", "id": "gen", "value": "up", "timestamp": "2026-01-02T03:04:05.000Z"},
        )
        with_user = feedback_payload({"response_id": "resp_1", "value": -1, "user_id": "u", "timestamp": 0}, lambda: "gen", NOW)
        self.assertEqual(with_user, {"response_id": "resp_1", "value": -1, "user_id": "u", "timestamp": "1970-01-01T00:00:00.000Z"})
        retract = feedback_payload({"span_id": "s", "value": None, "user_id": "u"}, lambda: "gen", NOW)
        self.assertIn("value", retract)
        self.assertIsNone(retract["value"])

    def test_bad_votes_say_why(self):
        self.assertRegex(feedback_payload({"value": "up"}, str, NOW), "needs a target")
        self.assertRegex(feedback_payload({"trace_id": "t", "value": "sideways"}, str, NOW), "'sideways'")
        self.assertRegex(feedback_payload({"trace_id": "t", "value": 1.5}, str, NOW), "1.5")
        self.assertRegex(feedback_payload({"trace_id": "t"}, str, NOW), "needs a value")
        self.assertRegex(feedback_payload({"trace_id": "t", "value": None}, str, NOW), "id or user_id")
        for v in ("up", "down", True, False, 1, 0, -1):
            self.assertIsInstance(feedback_payload({"trace_id": "t", "value": v}, str, NOW), dict)

    def test_a_tool_call_gets_its_ids(self):
        body, tid, sid = tool_call_payload(
            {"name": "get_weather", "arguments": {"city": "Paris"}, "error": ValueError("boom"), "started_at": NOW},
            lambda: "T" * 32,
            lambda: "S" * 16,
        )
        self.assertEqual(
            body,
            {
                "name": "get_weather",
                "arguments": {"city": "Paris"},
                "error": {"type": "ValueError", "message": "boom"},
                "started_at": "2026-01-02T03:04:05.000Z",
                "trace_id": "T" * 32,
                "span_id": "S" * 16,
            },
        )
        _, linked, _ = tool_call_payload({"name": "x", "response_id": "resp_1"}, str, lambda: "s")
        self.assertIsNone(linked)
        self.assertEqual(tool_call_payload({"name": ""}, str, str), "a tool call needs a name")

    def test_ids_and_times(self):
        self.assertRegex(new_trace_id(), "^[0-9a-f]{32}$")
        self.assertRegex(new_span_id(), "^[0-9a-f]{16}$")
        self.assertEqual(iso_time(datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))), "2026-01-01T10:00:00.000Z")
        self.assertEqual(iso_time(1.5), "1970-01-01T00:00:01.500Z")


class Answers(unittest.TestCase):
    def test_retry_after_seconds_or_date(self):
        self.assertEqual(retry_after_seconds("7", NOW), 7.0)
        self.assertEqual(retry_after_seconds("Fri, 02 Jan 2026 03:04:14 GMT", NOW), 9.0)
        self.assertEqual(retry_after_seconds("Thu, 01 Jan 2026 03:04:14 GMT", NOW), 0.0)
        self.assertIsNone(retry_after_seconds("soon", NOW))
        self.assertIsNone(retry_after_seconds(None, NOW))

    def test_the_wait_honours_retry_after_capped_else_backs_off_with_jitter(self):
        self.assertEqual(retry_delay(0, 2.0, 0.5, 30.0, lambda: 0), 2.0)
        self.assertAlmostEqual(retry_delay(0, 2.0, 0.5, 30.0, lambda: 1), 2.2)
        self.assertEqual(retry_delay(0, 120.0, 0.5, 30.0, lambda: 0.5), 30.0)
        self.assertEqual(retry_delay(0, None, 0.5, 30.0, lambda: 0), 0.25)
        self.assertEqual(retry_delay(3, None, 0.5, 30.0, lambda: 1), 4.0)

    def test_what_each_answer_means(self):
        self.assertEqual(classify(200, '{"accepted":1,"rejected":0}', None, "/api/traces", 1).kind, "sent")
        partial = classify(207, '{"rejected":1,"results":[{"index":0,"error":{}}]}', None, "/api/traces", 2)
        self.assertEqual((partial.kind, partial.rejected.code, partial.rejected.count), ("sent", "rejected", 1))
        for status in (408, 425, 429, 500, 503):
            self.assertEqual(classify(status, "", "2", "/api/traces", 1).kind, "retry")
        self.assertEqual(classify(429, "", "2", "/api/traces", 1).retry_after, 2.0)
        self.assertEqual(classify(413, "", None, "/api/traces", 2).kind, "split")
        unauthorized = classify(401, '{"error":{"code":"unauthorized","message":"unknown key"}}', None, "/api/traces", 3)
        self.assertEqual((unauthorized.kind, unauthorized.error.code), ("fail", "unauthorized"))
        self.assertEqual(unauthorized.error.message, "/api/traces answered 401 (unauthorized: unknown key)")

    def test_batch_bodies(self):
        self.assertEqual(batch_body("traces", ['{"a":1}']), b'[{"a":1}]')
        self.assertEqual(batch_body("feedback", ['{"v":1}']), b'{"feedback":[{"v":1}]}')
        self.assertEqual(batch_body("tool_calls", ["{}"]), b'{"tool_calls":[{}]}')


if __name__ == "__main__":
    unittest.main()
