"""What the admin's TOML file says, as frozen, validated objects (built by policies/loader.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal, TypeVar

from policies.budget import Period


class UnknownName(ValueError):
    """A client named something (a privacy level, a priority class) the policy does not
    define; `source` says where it named it (a header, the body's metadata)."""

    def __init__(self, what: str, source: str, name: str, kinds: str, known: list[str]) -> None:
        super().__init__(f"unknown {what} {name!r} in {source} ({kinds}: {', '.join(known)})")
        self.source = source


BackendKind = Literal["vllm", "ollama", "openai"]
BACKEND_KINDS: tuple[BackendKind, ...] = ("vllm", "ollama", "openai")


@dataclass(frozen=True)
class Server:
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 4 * 1024 * 1024
    probe_interval_s: float = 1.0
    log_level: str = "info"
    # Write each request's last user message into its log line: never for a privacy level
    # that may not leave the building (cloud = "none").
    log_prompts: bool = False
    # Where tenants' cloud spend is kept across restarts (None: in memory, a restart forgets it)
    spend_path: str | None = None
    # A body field a cloud call may not take (proxy/legs/cloud_params.py): dropped, or refused (400)
    unlisted_params: Literal["drop", "refuse"] = "drop"
    header_timeout_s: float = 10.0  # a request's line and headers must arrive within this
    body_timeout_s: float = 30.0  # a request body must arrive whole within this time (408)
    # Connections and requests at once, beyond which uvicorn answers 503 (behind nginx, keep
    # nginx's worker_connections at or under this)
    max_connections: int = 4096
    # A request's line and headers, in bytes and in fields; a larger head gets 431 (nginx
    # takes 32 KiB, Node 16 KiB, Go 1 MiB)
    max_head_bytes: int = 64 * 1024
    max_headers: int = 256


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 2.0
    first_byte_s: float = 60.0  # streamed requests: until the first chunk of the body
    idle_s: float = 60.0  # streamed requests: the longest silence between two chunks
    total_s: float = 600.0  # any request, first byte to last


@dataclass(frozen=True)
class Backend:
    name: str
    kind: BackendKind
    url: str
    # Public model name -> the engine's own name; None: discover from the engine's /v1/models.
    models: Mapping[str, str] | None = None
    max_concurrency: int | None = None
    api_key_env: str | None = None

    @property
    def discovers_models(self) -> bool:
        return self.models is None


@dataclass(frozen=True)
class CloudTarget:
    """A hosted model, by litellm's model string."""

    name: str
    model: str  # e.g. "openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"
    api_base: str | None = None
    api_key_env: str | None = None  # the environment variable holding the key, never the key
    # "litellm": through litellm (any provider); "openai": the provider speaks OpenAI's wire
    # format, and is reached as an engine is, bytes relayed (proxy/legs/cloud_wire.py);
    # "auto": "openai" for litellm's openai/ models, else "litellm"
    wire: str = "auto"

    @property
    def speaks_openai(self) -> bool:
        """Whether the call goes as OpenAI's wire format (no litellm on the hot path)."""
        if self.wire == "auto":
            return self.model.startswith("openai/")
        return self.wire == "openai"


@dataclass(frozen=True)
class Overflow:
    """When a local backend counts as saturated for a route (any threshold set and exceeded)."""

    max_waiting: int | None = None  # the engine's own waiting queue
    max_inflight_ratio: float | None = None  # proxy in-flight / backend max_concurrency
    max_kv_cache_usage: float | None = None  # 0-1, the engine's KV-cache usage
    ttft_slo_s: float | None = None  # overflow when the predicted time to first token exceeds it
    hysteresis: float = 0.1  # a saturated backend is usable again below (1 - hysteresis) x limit

    def scaled(self, share: float) -> Overflow:
        """The thresholds a class with this share of the backends may use."""
        if share == 1.0:
            return self

        def part(limit: float | None) -> float | None:
            return None if limit is None else limit * share

        waiting = None if self.max_waiting is None else int(self.max_waiting * share)
        return replace(
            self,
            max_waiting=waiting,
            max_inflight_ratio=part(self.max_inflight_ratio),
            max_kv_cache_usage=part(self.max_kv_cache_usage),
            ttft_slo_s=part(self.ttft_slo_s),
        )


# The semantic similarity a stored question needs by default to be a candidate. With the answer
# verifier (the default) it only decides which candidates the verifier reads: chosen on the
# labelled pairs of bench/data/cache_truth_pairs.jsonl (bench/cache_truth.py). Without it, it
# decides alone (with the guard), and needs the higher threshold chosen on
# bench/data/semantic_pairs.jsonl (bench/semantic.py). The figures are in the README.
DEFAULT_SEMANTIC_THRESHOLD = 0.7
UNVERIFIED_SEMANTIC_THRESHOLD = 0.9


@dataclass(frozen=True)
class CacheRule:
    """What a route answers from the cache and shares in flight. [cache] sets the defaults,
    a route's [routes.cache] overrides them key by key."""

    exact: bool = True
    semantic: bool = True
    threshold: float = DEFAULT_SEMANTIC_THRESHOLD  # cosine similarity of the last user messages
    ttl_s: float = 3600.0
    max_entries: int = 10_000  # per scope (tenant x public model), least recently used evicted
    unset_temperature: bool = False  # True: a request without `temperature` is deterministic
    tools: bool = False  # True: requests with tools are cacheable too (exact layer only)
    coalesce: bool = True  # identical deterministic requests in flight share one upstream call
    coalesce_nondeterministic: bool = False  # ... and so do those with temperature > 0
    # While the answer verifier reads a candidate, the engine's work starts too when the request
    # goes first to a local backend with room; the first to finish decides (flow/speculation.py)
    speculate: bool = True
    # The semantic layer for callers without a key (the anonymous scope, a tenant named by
    # header alone): off, as anyone could store what a paraphrase of another's question gets
    semantic_unkeyed: bool = False


EncoderKind = Literal["onnx", "torch"]


@dataclass(frozen=True)
class CacheSettings:
    enabled: bool = True
    path: str | None = None  # where the cache is kept across restarts; None: memory only
    save_interval_s: float = 30.0
    embedder: EncoderKind = "onnx"  # "torch": the sentence-transformers reference
    rule: CacheRule = field(default_factory=CacheRule)  # the defaults of every route
    # The whole cache, every scope together: least recently used evicted beyond either bound
    max_total_entries: int = 100_000
    max_bytes: int = 256 * 1024 * 1024
    # A similar question is served only if the answer verifier (cache/verifier.py) agrees its
    # answer answers the question asked; false: the threshold and the guard alone decide.
    verifier: bool = True


@dataclass(frozen=True)
class Degrade:
    """What a request may be given instead of a wait or a refusal, when no local backend has
    room for it now and it does not go to the cloud."""

    model: str | None = None  # a smaller public model, taken when one of its backends has room
    max_tokens: int | None = None  # else a shorter answer: less work, a shorter wait


@dataclass(frozen=True)
class Route:
    model: str  # the public model name
    local: tuple[str, ...] = ()  # backend names in preference order; () = every one serving it
    cloud: tuple[str, ...] = ()  # the cloud fallback chain, in order
    overflow: Overflow = field(default_factory=Overflow)
    deadline_s: float | None = None  # a request that cannot start by then is refused
    cache: CacheRule | None = None  # None: the [cache] defaults
    degrade: Degrade = field(default_factory=Degrade)


Strategy = Literal["prefix", "least_loaded", "round_robin"]
STRATEGIES: tuple[Strategy, ...] = ("prefix", "least_loaded", "round_robin")


@dataclass(frozen=True)
class Balancing:
    """How a request picks among the usable local replicas of its model."""

    # "prefix": the replica already holding the longest part of the prompt in its KV cache,
    # unless it is much busier than the least loaded one; "least_loaded": least outstanding
    # work; "round_robin": in turn (for comparison).
    strategy: Strategy = "prefix"
    min_prefix_tokens: int = 256  # a shared prefix shorter than this is not worth a detour
    # The holder is "much busier" when it has more than balance_abs outstanding requests beyond
    # the least loaded replica AND more than balance_rel times as many (SGLang's cache-aware
    # router uses the same two thresholds): then load wins over the cache.
    balance_abs: int = 4
    balance_rel: float = 1.5
    block_tokens: int = 32  # the prefix index's block (about 4 characters a token)
    index_blocks: int = 200_000  # the prefix index's bound (least recently used forgotten)
    # Prefix coalescing: a request whose prefix is being prefilled on its replica by another
    # (streamed) request waits for that one's first token, at most this long. Off by default:
    # vLLM V1 keys a block as soon as it is scheduled, so a burst reaching one replica already
    # prefills a shared prefix once (measured, bench/prefix.py); for engines that do not.
    warm_wait_s: float = 0.0

    @property
    def block_chars(self) -> int:
        return 4 * self.block_tokens


@dataclass(frozen=True)
class PrivacyLevel:
    name: str
    cloud: Literal["any", "none"] | tuple[str, ...] = "any"  # which cloud targets it may reach
    # Cached answers are always scoped to the tenant. "tenant": cached only for a known tenant
    # (never in the scope shared by requests that name none); "none": never cached.
    cache: Literal["any", "tenant", "none"] = "any"
    # To a cloud target only redacted: what the detectors find leaves as typed placeholders,
    # restored in the answer before the client sees it.
    redact: bool = False

    def allows(self, cloud_target: str) -> bool:
        if self.cloud == "any":
            return True
        if self.cloud == "none":
            return False
        return cloud_target in self.cloud


@dataclass(frozen=True)
class Privacy:
    levels: tuple[PrivacyLevel, ...] = (PrivacyLevel("public"),)  # least strict first
    default: str = "public"
    detectors: Mapping[str, str] = field(default_factory=dict)  # detector -> level it implies
    media: str | None = None  # the level a request carrying images, audio or files is at least
    send_user: bool = False  # pass `user` and `safety_identifier` on to cloud targets
    # A long body's scan (in a worker thread) that takes longer counts as if every enabled
    # detector had found something: the request is never sent on unchecked.
    scan_timeout_s: float = 5.0

    def level(self, name: str) -> PrivacyLevel:
        return self._levels[name]

    def strictness(self, name: str) -> int:
        """The level's rank, least strict 0; ValueError for a name that is no level."""
        rank = self._ranks.get(name)
        if rank is None:
            raise ValueError(f"{name!r} is not a privacy level")
        return rank

    @cached_property
    def _ranks(self) -> dict[str, int]:  # asked for on every request, once per claim
        return {level.name: rank for rank, level in enumerate(self.levels)}

    @cached_property
    def _levels(self) -> dict[str, PrivacyLevel]:  # asked for on every request
        return {level.name: level for level in self.levels}


@dataclass(frozen=True)
class Priority:
    """A class of requests. Classes are listed most urgent first."""

    name: str
    # The share of each local backend's overflow thresholds this class may use: at 0.75, a
    # batch request finds a backend saturated at 75% of what an interactive one may use, so the
    # rest stays free for the more urgent class.
    local_share: float = 1.0
    overflow: bool = True  # may go to the cloud when locals are saturated (privacy permitting)
    # The longest it may wait in the proxy's queue for a local backend; 0: no proxy queue (it is
    # sent to a saturated engine, whose own queue holds it). Past it: 429 on arrival when the
    # predicted wait is longer, 503 if it waited that long after all.
    max_wait_s: float = 30.0


@dataclass(frozen=True)
class Priorities:
    classes: tuple[Priority, ...] = (Priority("interactive"),)
    default: str = "interactive"
    aging_s: float = 30.0  # every aging_s waited lifts a request one class: nothing starves

    def rank(self, name: str) -> int:
        rank = self._ranks.get(name)
        if rank is None:
            raise ValueError(f"{name!r} is not in list of priority classes")
        return rank

    @cached_property
    def _ranks(self) -> dict[str, int]:  # asked for on every request
        return {p.name: rank for rank, p in enumerate(self.classes)}

    def of(self, name: str) -> Priority:
        return self.classes[self.rank(name)]


@dataclass(frozen=True)
class Limits:
    """A tenant's share of the engines. Rates are token buckets that refill continuously and
    hold burst_s seconds' worth: a tenant idle for a while may send that much at once."""

    requests_per_minute: int | None = None
    # Prompt tokens plus the answer's budget, estimated at admission and corrected from the
    # usage the answer reports. A cache hit computes nothing and costs nothing.
    tokens_per_minute: int | None = None
    max_concurrent: int | None = None  # requests in flight at once
    burst_s: float = 10.0

    @property
    def limiting(self) -> bool:
        return any(
            v is not None
            for v in (self.requests_per_minute, self.tokens_per_minute, self.max_concurrent)
        )


@dataclass(frozen=True)
class Tenant:
    name: str
    privacy: str | None = None  # default privacy level of its requests
    api_keys: tuple[str, ...] = ()  # SHA-256 hex digests of its keys: the keys are never kept
    limits: Limits = field(default_factory=Limits)
    models: tuple[str, ...] | None = None  # the public models it may use; None: every one
    # Past this spend (litellm's prices) in the calendar period (UTC), the cloud is closed to it
    cloud_budget_usd: float | None = None
    budget_period: Period = "day"
    priority: str | None = None  # its requests' class (they may ask for a lower one, not higher)


@dataclass(frozen=True)
class Auth:
    """Who may call. Without require_keys, a request names its tenant by header (or not at
    all); a tenant that has keys must still show one of them."""

    require_keys: bool = False
    # SHA-256 digests; none: the admin endpoints are open, or closed to all with require_keys
    admin_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class BreakerSettings:
    consecutive_failures: int = 5
    failure_rate: float = 0.5  # open when this share of the window's calls failed ...
    min_calls: int = 10  # ... and the window holds at least this many
    window_s: float = 30.0
    open_s: float = 5.0  # how long it stays open before letting probes through
    half_open_probes: int = 2  # successes needed to close again


@dataclass(frozen=True)
class RetrySettings:
    attempts: int = 3  # per target, before moving on to the next one
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    jitter: bool = True


@dataclass(frozen=True)
class Policy:
    server: Server = field(default_factory=Server)
    timeouts: Timeouts = field(default_factory=Timeouts)
    backends: tuple[Backend, ...] = ()
    clouds: tuple[CloudTarget, ...] = ()
    routes: tuple[Route, ...] = ()
    privacy: Privacy = field(default_factory=Privacy)
    tenants: tuple[Tenant, ...] = ()
    auth: Auth = field(default_factory=Auth)
    priorities: Priorities = field(default_factory=Priorities)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    balancing: Balancing = field(default_factory=Balancing)
    source: str = "<defaults>"  # the file it was read from, for messages

    def backend(self, name: str) -> Backend:
        return self._backends[name]

    def cloud(self, name: str) -> CloudTarget:
        return self._clouds[name]

    def has_target(self, name: str) -> bool:
        """A backend or a cloud target of this name is declared."""
        return name in self._backends or name in self._clouds

    def route(self, model: str) -> Route | None:
        return self._routes.get(model)

    def cache_rule(self, model: str) -> CacheRule:
        route = self.route(model)
        return route.cache if route is not None and route.cache is not None else self.cache.rule

    def tenant(self, name: str) -> Tenant | None:
        return self._tenants.get(name)

    def default_route(self, model: str) -> Route:
        """The route of a model no [[routes]] names: the defaults, built once per model (a
        request asks for its route several times). Model names come from clients: at most
        _DEFAULT_ROUTES are kept, then the memory starts again."""
        routes = self._default_routes
        route = routes.get(model)
        if route is None:
            if len(routes) >= _DEFAULT_ROUTES:
                routes.clear()
            route = routes[model] = Route(model)
        return route

    @cached_property
    def _default_routes(self) -> dict[str, Route]:
        return {}

    # Looked up on every request, by name: built once per policy (names are unique, the loader
    # checks; the first of a name wins, as a search would find it).
    @cached_property
    def _backends(self) -> dict[str, Backend]:
        return _first_by_name([(b.name, b) for b in self.backends])

    @cached_property
    def _clouds(self) -> dict[str, CloudTarget]:
        return _first_by_name([(c.name, c) for c in self.clouds])

    @cached_property
    def _routes(self) -> dict[str, Route]:
        return _first_by_name([(r.model, r) for r in self.routes])

    @cached_property
    def _tenants(self) -> dict[str, Tenant]:
        return _first_by_name([(t.name, t) for t in self.tenants])


_Named = TypeVar("_Named")
_DEFAULT_ROUTES = 1024


def _first_by_name(pairs: list[tuple[str, _Named]]) -> dict[str, _Named]:
    found: dict[str, _Named] = {}
    for name, item in pairs:
        found.setdefault(name, item)
    return found
