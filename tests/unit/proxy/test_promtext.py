"""proxy/legs/promtext.py: reading an engine's load gauges out of Prometheus text."""

from __future__ import annotations

import math

from proxy.legs.promtext import sample_values

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0

# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="my model, v2"} 0.25
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 12.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 12.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 33.5
# HELP vllm:num_requests_waiting_by_reason Requests waiting, by reason.
vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 99.0
process_open_fds 42.0

"""

GAUGES = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"}


def test_every_label_set_of_a_wanted_metric_is_collected() -> None:
    values = sample_values(VLLM_METRICS, GAUGES)
    assert values == {
        "vllm:num_requests_running": [3.0, 2.0],
        "vllm:num_requests_waiting": [7.0, 0.0],
        "vllm:kv_cache_usage_perc": [0.25],
    }


def test_unwanted_metrics_are_left_out() -> None:
    values = sample_values(VLLM_METRICS, {"vllm:num_requests_waiting"})
    assert list(values) == ["vllm:num_requests_waiting"]


def test_longer_names_sharing_a_prefix_are_not_the_wanted_metric() -> None:
    values = sample_values(VLLM_METRICS, {"vllm:num_requests_waiting"})
    assert 99.0 not in values["vllm:num_requests_waiting"]


def test_histogram_buckets_are_not_taken_for_the_histogram_name() -> None:
    assert sample_values(VLLM_METRICS, {"vllm:e2e_request_latency_seconds"}) == {}


def test_histogram_series_can_be_asked_for_by_full_name() -> None:
    wanted = {"vllm:e2e_request_latency_seconds_count", "vllm:e2e_request_latency_seconds_bucket"}
    assert sample_values(VLLM_METRICS, wanted) == {
        "vllm:e2e_request_latency_seconds_count": [12.0],
        "vllm:e2e_request_latency_seconds_bucket": [1.0, 12.0],
    }


def test_metric_without_labels() -> None:
    assert sample_values(VLLM_METRICS, {"process_open_fds"}) == {"process_open_fds": [42.0]}


def test_help_and_type_comments_are_not_samples() -> None:
    text = "# HELP wanted Something.\n# TYPE wanted gauge\n"
    assert sample_values(text, {"wanted", "HELP", "TYPE"}) == {}


def test_metric_absent_from_the_text_is_absent_from_the_result() -> None:
    assert sample_values(VLLM_METRICS, {"vllm:gpu_cache_usage_perc"}) == {}


def test_empty_text_gives_nothing() -> None:
    assert sample_values("", GAUGES) == {}


def test_label_values_with_spaces_and_commas() -> None:
    text = 'queue{model_name="a b, c",path="/v1/chat completions"} 4\n'
    assert sample_values(text, {"queue"}) == {"queue": [4.0]}


def test_nan_and_infinite_values_are_read() -> None:
    text = 'g{a="1"} NaN\ng{a="2"} +Inf\ng{a="3"} -Inf\n'
    values = sample_values(text, {"g"})["g"]
    assert math.isnan(values[0])
    assert values[1:] == [math.inf, -math.inf]


def test_timestamp_after_the_value_is_ignored() -> None:
    text = "g 5 1712345678000\n"
    assert sample_values(text, {"g"}) == {"g": [5.0]}


def test_unparsable_value_is_skipped_but_the_others_kept() -> None:
    text = 'g{a="1"} oops\ng{a="2"} 1e3\n'
    assert sample_values(text, {"g"}) == {"g": [1000.0]}


def test_windows_line_endings_and_blank_lines() -> None:
    text = "\r\n# TYPE g gauge\r\ng 1\r\n\r\ng 2\r\n"
    assert sample_values(text, {"g"}) == {"g": [1.0, 2.0]}
