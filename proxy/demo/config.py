"""What `overspill serve --demo` runs, and the configuration it writes for it (pure).

Three small local engines (simulators sized like modest GPUs, so a few requests a second fill
them) and a simulated cloud reached through litellm as a real one would be, behind a policy that
shows the product: overflow to the cloud, the answer cache, personal data kept local, two
tenants. The file is meant to be read and copied: every section says what it does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.apikeys import digest
from policies.pii import DETECTORS

PUBLIC_MODEL = "llama-3.1-8b"
CLOUD = "openai-mini"
# The demo's cloud simulator ignores the key, but litellm sends one, read from the environment
# like any cloud key: the demo sets this variable for its own process.
CLOUD_KEY_ENV = "OVERSPILL_DEMO_CLOUD_KEY"
CLOUD_KEY = "sk-demo-cloud-not-a-secret"

# A decode step this long and a batch this small make each local engine a modest GPU: an answer
# of ~50 tokens takes ~1.5 s, and the three together hold 10 requests at once.
_STEP_MS = "30"
_ANSWER_TOKENS = "64"  # when a request sets no max_tokens


@dataclass(frozen=True)
class DemoEngine:
    name: str
    kind: str  # the backend kind, and the simulator's personality
    models: Mapping[str, str]  # public model name -> the engine's own
    slots: int  # sequences decoded at once: the simulator's batch, the backend's max_concurrency

    def sim_args(self) -> list[str]:
        """`overspill sim` arguments for this engine."""
        args = ["sim", "--port", "0", "--personality", self.kind]
        for engine_model in dict.fromkeys(self.models.values()):
            args += ["--model", engine_model]
        return [
            *args,
            "--max-seqs",
            str(self.slots),
            "--decode-base-ms",
            _STEP_MS,
            "--output-tokens",
            _ANSWER_TOKENS,
        ]


ENGINES = (
    DemoEngine("vllm-a", "vllm", {PUBLIC_MODEL: "meta-llama/Llama-3.1-8B-Instruct"}, 4),
    DemoEngine("vllm-b", "vllm", {PUBLIC_MODEL: "meta-llama/Llama-3.1-8B-Instruct"}, 4),
    DemoEngine("ollama-1", "ollama", {PUBLIC_MODEL: "llama3.1:8b", "qwen2.5:7b": "qwen2.5:7b"}, 2),
)


def cloud_sim_args() -> list[str]:
    """A hosted API: unbounded capacity behind ~200 ms of network; it records what reaches it."""
    return ["sim", "--port", "0", "--personality", "cloud", "--output-tokens", _ANSWER_TOKENS]


@dataclass(frozen=True)
class DemoTenant:
    name: str
    key: str | None = None  # its API key (a demo's, printed in the help); None: named by header
    requests_per_minute: int | None = None


TENANTS = (
    DemoTenant("support"),
    DemoTenant("research", key="sk-demo-research", requests_per_minute=120),
)


def demo_config(host: str, port: int, urls: Mapping[str, str]) -> str:
    """The demo's configuration; `urls` has each engine's and the cloud's simulator URL."""
    backends = [_backend(engine, urls[engine.name]) for engine in ENGINES]
    return "\n".join(
        [
            _HEADER,
            _server(host, port),
            _BACKENDS,
            *backends,
            _cloud(urls[CLOUD]),
            _ROUTE,
            _PRIVACY,
            _tenants(),
            _CACHE,
        ]
    )


_HEADER = """\
# Written by `overspill serve --demo` for this run: simulators stand in for the engines and for
# the cloud. A starting point for your own file: copy it, point [[backends]] at your engines and
# [[clouds]] at your provider, then `overspill check FILE` and `overspill serve --config FILE`.
# config.example.toml documents every key.
"""


def _server(host: str, port: int) -> str:
    return f"""\
[server]
host = "{host}"
port = {port}
probe_interval_s = 0.5      # how often each engine's health and load are read
log_level = "warning"       # "info": one JSON line per request, with its route and reasons
"""


_BACKENDS = """\
# The local engines: two vLLM-like, one Ollama-like, each serving the public model under its own
# name. max_concurrency: requests this proxy may have in flight there (the simulator's batch).
"""


def _backend(engine: DemoEngine, url: str) -> str:
    models = ", ".join(f'"{public}" = "{own}"' for public, own in engine.models.items())
    return f"""\
[[backends]]
name = "{engine.name}"
kind = "{engine.kind}"
url = "{url}"
models = {{ {models} }}
max_concurrency = {engine.slots}
"""


def _cloud(url: str) -> str:
    return f"""\
# The cloud, through litellm. Here a simulator stands in for OpenAI (api_base); for the real one,
# drop api_base and name the variable that holds your key.
[[clouds]]
name = "{CLOUD}"
model = "openai/gpt-4o-mini"
api_base = "{url}/v1"
api_key_env = "{CLOUD_KEY_ENV}"
"""


_ROUTE = f"""\
# {PUBLIC_MODEL}: the local engines first; the cloud only when every one of them is full.
[[routes]]
model = "{PUBLIC_MODEL}"
local = [{", ".join(f'"{e.name}"' for e in ENGINES)}]
cloud = ["{CLOUD}"]

[routes.overflow]
max_inflight_ratio = 1.0    # full at max_concurrency requests in flight from this proxy
max_waiting = 2             # ... or with requests waiting in the engine's own queue
ttft_slo_s = 1.0            # ... or when the first token would come later than this

# The answer cache for this model, including requests that set no temperature. Clients rarely
# set one, and the engines then sample: with unset_temperature = true the proxy treats such a
# request as deterministic, so the same (or a similar) question may be answered with an earlier
# sample instead of a fresh one. Leave it false where every call must sample anew.
# semantic_unkeyed: a similar question's answer for callers without a key too (the demo's
# "support" names itself by header). Anyone can claim such a scope and plant an answer that
# a paraphrase is then served: in production, give tenants keys and leave this out.
[routes.cache]
unset_temperature = true
semantic_unkeyed = true
ttl_s = 600.0
"""

# every built-in detector (policies/pii.py)
_DETECTORS = "\n".join(f'{name} = "restricted"' for name in DETECTORS)

_PRIVACY = f"""\
# Privacy levels, least strict first, and which clouds each may reach. A request with personal
# data (the detectors below) is "restricted": served by a local engine, or refused with a 503
# that names the rule when none can take it. It never reaches the cloud, and is cached only in
# its tenant's own scope.
[privacy]
default = "public"
levels = [
  {{ name = "public", cloud = "any" }},
  {{ name = "restricted", cloud = "none", cache = "tenant" }},
]
# images, audio and files stay local too (their data is never read as text)
media = "restricted"

[privacy.detectors]
{_DETECTORS}

# A request that may only run locally while every engine is full waits in the proxy, at most
# max_wait_s, rather than in an engine's queue.
[priorities]
default = "interactive"
classes = [{{ name = "interactive", max_wait_s = 10 }}]
"""


def _tenants() -> str:
    lines = [
        "# Who calls. Without require_keys, a request may name its tenant with the",
        "# X-Overspill-Tenant header; a tenant that has keys must show one (Authorization:",
        "# Bearer KEY, the SDKs' api_key). Keys are declared by their SHA-256, never in clear.",
        "[auth]",
        "require_keys = false",
        "",
    ]
    for tenant in TENANTS:
        lines += ["[[tenants]]", f'name = "{tenant.name}"']
        if tenant.key is not None:
            lines.append(f'api_keys = ["sha256:{digest(tenant.key)}"]   # the key "{tenant.key}"')
        if tenant.requests_per_minute is not None:
            lines.append(
                f"requests_per_minute = {tenant.requests_per_minute}   # beyond: 429 "
                "with Retry-After (bursts of 10 s worth)"
            )
        else:
            lines += [
                "cloud_budget_usd = 1.0   # then no more cloud until the day ends (UTC)",
                'budget_period = "day"',
            ]
        lines.append("")
    return "\n".join(lines)


_CACHE = """\
# The answer cache: exact repeats, and questions similar enough (all-MiniLM-L6-v2 embeddings)
# that differ in nothing critical (numbers, names, negation), when the answer verifier agrees
# one answer serves both. Kept in memory for the demo; set `path` to keep it across restarts.
[cache]
enabled = true
exact = true
semantic = true
verifier = true
threshold = 0.7
"""
