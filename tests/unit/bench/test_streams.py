"""bench/streams.py and its client: what a stream's bytes say, the gaps and percentiles taken
from recorded arrival times, errors tallied by kind, and the report (no processes)."""

from __future__ import annotations

import orjson
import pytest

from bench.streams import Cell, mismatches, ratio_lines, report
from bench.streams_client import (
    SSEReader,
    StreamRecord,
    Summary,
    body,
    error_message,
    percentile,
    record_of,
    summarize,
    tally,
)

OPENER = b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'


def token(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"' + text.encode() + b'"}}]}\n\n'


def test_tokens_are_timed_when_they_arrive_however_the_bytes_were_cut() -> None:
    reader = SSEReader()
    stream = OPENER + token("a") + token("b") + b"data: [DONE]\n\n"
    reader.feed(stream[:10], 1.0)  # nothing whole yet
    reader.feed(stream[10 : len(OPENER) + 20], 2.0)  # the opener: not a token
    reader.feed(stream[len(OPENER) + 20 : -5], 3.0)  # "a" completes, "b" whole
    assert reader.token_times == [3.0, 3.0]
    assert not reader.done
    reader.feed(stream[-5:], 4.0)
    assert reader.done
    assert reader.error is None


def test_an_error_event_is_the_streams_error() -> None:
    reader = SSEReader()
    error = {"error": {"message": "sim: stream silent for 60s", "type": "timeout"}}
    reader.feed(token("a") + b"data: " + orjson.dumps(error) + b"\n\n", 1.0)
    assert reader.error == "stream error: sim: stream silent for 60s"
    assert reader.token_times == [1.0]


def test_error_message_reads_openai_bodies_and_keeps_other_text() -> None:
    assert error_message(b'{"error": {"message": "no response within 60s"}}') == (
        "no response within 60s"
    )
    assert error_message(b"Internal Server Error\n") == "Internal Server Error"
    assert error_message(b"x" * 500, limit=10) == "x" * 10


def test_a_record_is_complete_only_with_done_and_every_token() -> None:
    whole = SSEReader([1.0, 1.2], done=True)
    assert record_of(0.5, whole, tokens=2).error is None
    assert record_of(0.5, whole, tokens=3).error == "2 tokens, 3 asked"
    assert record_of(0.5, SSEReader([1.0]), tokens=1).error == "stream ended without [DONE]"
    failed = SSEReader(error="504 sim: no response within 60s")
    assert record_of(0.5, failed, tokens=1).error == "504 sim: no response within 60s"


def test_ttft_and_gaps_come_from_the_arrival_times() -> None:
    record = StreamRecord(10.0, (10.3, 10.5, 10.5, 11.2))
    assert record.ttft == pytest.approx(0.3)
    assert record.gaps() == pytest.approx([0.2, 0.0, 0.7])
    silent = StreamRecord(10.0, (), "connect: Connection refused")
    assert silent.ttft is None
    assert silent.gaps() == []


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert percentile([5.0], 0) == 5.0
    assert percentile([], 50) is None


def test_errors_are_tallied_by_kind_most_frequent_first() -> None:
    records = [
        StreamRecord(0.0, (), "ServerDisconnectedError"),
        StreamRecord(0.0, (), "504 sim: no response within 60s"),
        StreamRecord(0.0, (1.0,)),
        StreamRecord(0.0, (), "504 sim: no response within 60s"),
    ]
    assert list(tally(records).items()) == [
        ("504 sim: no response within 60s", 2),
        ("ServerDisconnectedError", 1),
    ]


def test_a_summary_counts_every_stream_and_every_gap_and_survives_json() -> None:
    records = [
        StreamRecord(0.0, (0.1, 0.2, 0.3)),
        StreamRecord(0.0, (0.4, 0.6), "stream ended without [DONE]"),
        StreamRecord(0.0, (), "504 x"),
    ]
    summary = summarize(records, client_cpu_s=1.23456, seconds=2.0)
    assert (summary.started, summary.completed, summary.gaps) == (3, 1, 3)
    assert summary.errors == {"stream ended without [DONE]": 1, "504 x": 1}
    assert summary.ttft_p50_ms == pytest.approx(100.0)
    assert summary.ttft_p99_ms == pytest.approx(400.0)
    assert summary.gap_p99_ms == pytest.approx(200.0)
    assert summary.client_cpu_s == 1.235
    assert Summary.from_json(summary.to_json()) == summary


def test_bodies_are_distinct_streamed_and_ask_for_the_tokens() -> None:
    bodies = [orjson.loads(body("tag", n, 32)) for n in range(100)]
    assert len({b["messages"][0]["content"] for b in bodies}) == 100
    assert all(b["stream"] is True and b["max_tokens"] == 32 for b in bodies)


def summary(ttft_p99: float, gap_p99: float, errors: dict[str, int] | None = None) -> Summary:
    errors = errors or {}
    return Summary(100, 100 - sum(errors.values()), errors, 1.0, ttft_p99, 1.0, gap_p99, 900)


def test_ratios_compare_overspill_with_the_floor_at_each_level() -> None:
    cells = [
        Cell("bare forwarder", 500, summary(400.0, 200.0), 100),
        Cell("overspill forwarding", 500, summary(440.0, 230.0), 100),
        Cell("bare forwarder", 1000, summary(400.0, 100.0), 100),
        Cell("overspill forwarding", 1000, summary(400.0, 722.0, {"504 x": 8}), 100),
    ]
    lines = ratio_lines(cells).splitlines()
    assert lines == [
        "overspill forwarding vs bare forwarder at 500: TTFT p99 1.1x, gap p99 1.15x, "
        "errors added 0 (meets the goal: <= 1.2x, none added)",
        "overspill forwarding vs bare forwarder at 1000: TTFT p99 1.0x, gap p99 7.22x, "
        "errors added 8 (misses the goal: <= 1.2x, none added)",
    ]


def test_the_report_shows_every_cell_its_errors_and_its_loop_lag() -> None:
    lag = {0.05: 40, 0.1: 45, 0.25: 48, 1.0: 50, float("inf"): 50}
    cells = [
        Cell("direct", 500, summary(300.0, 160.0), 100, engine_cpu_s=2.0),
        Cell("overspill forwarding", 500, summary(300.0, 160.0, {"504 x": 3}), 100, 5.0, 90.0),
        Cell("overspill forwarding", 1000, summary(1.0, 1.0), 100, loop_lag=lag),
    ]
    text = report(cells)
    assert text.count("| direct ") == 1
    assert text.count("| overspill forwarding ") == 2
    assert "errors, overspill forwarding at 500: 3 x 504 x" in text
    assert (
        "event loop lag, overspill forwarding at 1000: 50 wake-ups, "
        "10 > 50 ms, 5 > 100 ms, 2 > 250 ms, 0 > 1000 ms"
    ) in text
    assert "vs bare forwarder" not in text  # no floor measured: no ratio


def test_a_cell_whose_engine_got_other_than_was_sent_is_a_mismatch() -> None:
    cells = [
        Cell("direct", 500, summary(1.0, 1.0), 100),
        Cell("overspill forwarding", 2000, summary(1.0, 1.0), 42),
    ]
    assert mismatches(cells) == ["overspill forwarding (2000 streams): sent 100, engine got 42"]
