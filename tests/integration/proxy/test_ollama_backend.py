"""Ollama behind the proxy: its OpenAI-compatible endpoint, and warm instances preferred."""

from __future__ import annotations

import httpx
import openai

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim

OLLAMA = ("--personality", "ollama", "--load-ms", "600", *FAST_ENGINE)


def test_openai_sdk_through_proxy_to_ollama_with_model_mapping() -> None:
    with sim(*OLLAMA, "--model", "llama3.1:8b") as engine:
        config = backend_toml("ollama-1", "ollama", engine.url, {"llama": "llama3.1:8b"})
        with proxy("[server]\nprobe_interval_s = 0.2\n" + config) as p:
            api = openai.OpenAI(base_url=p.url + "/v1", api_key="x", max_retries=0)
            messages = [{"role": "user", "content": "hi"}]
            reply = api.chat.completions.create(model="llama", messages=messages, max_tokens=4)  # type: ignore[arg-type]
            assert reply.usage is not None
            assert reply.usage.completion_tokens == 4
            chunks = list(
                api.chat.completions.create(
                    model="llama", messages=messages, max_tokens=4, stream=True
                )  # type: ignore[arg-type]
            )
            assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 4


def test_discovered_models_from_api_tags() -> None:
    with (
        sim(*OLLAMA, "--model", "llama3.1:8b", "--model", "qwen2.5:7b") as engine,
        proxy(backend_toml("o", "ollama", engine.url)) as p,
    ):
        listed = httpx.get(p.url + "/v1/models").json()["data"]
        assert sorted(m["id"] for m in listed) == ["llama3.1:8b", "qwen2.5:7b"]


def loads(engine: Process) -> int:
    """Models the simulator has loaded into memory since it started (cold loads)."""
    return int(httpx.get(engine.url + "/_sim/stats").json()["loads"])


def test_an_instance_with_the_model_loaded_is_preferred() -> None:
    """Two idle Ollama instances; only `warm` has the model in memory: every request goes there
    (a cold load would cost 600 ms), though a random tie-break would split them. The instances'
    own counts show it: `cold` received nothing and loaded nothing, `warm` loaded only once."""
    with (
        sim(*OLLAMA, "--model", "llama3.1:8b") as warm,
        sim(*OLLAMA, "--model", "llama3.1:8b") as cold,
    ):
        load = {
            "model": "llama3.1:8b",
            "prompt": "x",
            "stream": False,
            "options": {"num_predict": 1},
        }
        httpx.post(warm.url + "/api/generate", json=load)
        backends = backend_toml("warm", "ollama", warm.url) + backend_toml(
            "cold", "ollama", cold.url
        )
        with proxy("[server]\nprobe_interval_s = 0.2\n" + backends) as p:
            body = {"model": "llama3.1:8b", "messages": [{"role": "user", "content": "x"}]}
            routes = [
                httpx.post(p.url + "/v1/chat/completions", json={**body, "max_tokens": 2}).headers[
                    "x-overspill-route"
                ]
                for _ in range(12)
            ]
            assert routes == ["local/warm"] * 12
            assert (loads(warm), loads(cold)) == (1, 0)  # not one cold load
            assert httpx.get(cold.url + "/_sim/stats").json()["requests"] == 0
            status = httpx.get(p.url + "/admin/status").json()["backends"]
            assert status[0]["load"]["loaded_models"] == ["llama3.1:8b"]
            assert status[1]["load"]["loaded_models"] == []
