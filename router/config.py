"""Configuration: one YAML file loaded into strict pydantic models.

Contract (ARCHITECTURE §10): unknown keys are errors, ``${ENV_VAR}`` (and
``${ENV_VAR:-default}``) is expanded inside strings before validation, and any
problem stops start-up with a :class:`ConfigError` whose message names the key
path (``models[1].context_window: ...``). Key names are a public contract:
add keys freely, rename none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from router.core.first_sight import FirstSightSettings
from router.core.limits import NO_LIMITS, KeyLimits
from router.core.pinch import MIN_SUMMARIZE_CHARS
from router.core.tenants import USER, Role, Tenant, plain_key_name
from router.wire.anthropic_messages.thinking import binds_thinking

# What agents send, in the order they are looked for: ours, then opencode's (x-session-id and
# x-session-affinity), Claude Code's, Codex's (session-id, thread-id).
DEFAULT_SESSION_HEADERS = (
    "x-router-session",
    "x-session-id",
    "x-session-affinity",
    "x-claude-code-session-id",
    "session-id",
    "thread-id",
)
# A routing alias that routes every model name the catalogue does not know.
ANY_MODEL_ALIAS = "*"

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


def _in_bytes(setting: str) -> property:
    """A setting given in MiB (``…_mb``), read in bytes: what the limits compare sizes with."""
    return property(lambda settings: int(getattr(settings, setting) * 1024 * 1024), doc=f"``{setting}`` in bytes")


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A client key's name: what its decision rows, metrics and docs call it (never the key).
KeyName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")]


class KeyLimitsSettings(_Strict):
    """A client key's limits (docs/keys.md, router.core.limits), each optional: requests and tokens per
    UTC minute, dollars per UTC day and calendar month (priced from the models' cost_per_mtok)."""

    requests_per_minute: PositiveInt | None = None
    tokens_per_minute: PositiveInt | None = None
    usd_per_day: PositiveFloat | None = None
    usd_per_month: PositiveFloat | None = None

    def limits(self) -> KeyLimits:
        return KeyLimits(self.requests_per_minute, self.tokens_per_minute, self.usd_per_day, self.usd_per_month)


class ApiKeySettings(_Strict):
    """One client key given as an object (docs/keys.md): a tenant with a name, a role and its limits."""

    name: KeyName
    # The key itself (may be ${ENV}), or the name of the variable holding it (read at start, never stored).
    key: str | None = None
    key_env: str | None = None
    # user: sees and acts on its own decisions, outcomes and sessions only; admin: on everyone's.
    role: Role = USER
    # Checked before the upstream is called; over one ⇒ 429 with Retry-After (router.core.limits).
    limits: KeyLimitsSettings | None = None

    @model_validator(mode="after")
    def _one_key(self) -> ApiKeySettings:
        if (self.key is None) == (self.key_env is None):
            raise ValueError(f"key {self.name!r}: give one of key or key_env")
        if self.key is not None and not self.key.strip():
            raise ValueError(f"key {self.name!r}: the key is empty (is its ${{ENV_VAR}} unset?)")
        return self

    def secret(self) -> str | None:
        """The key: as written, or read now from ``key_env`` (None while that variable is unset or empty)."""
        return self.key if self.key is not None else env_secret(self.key_env)


# A server.api_keys entry: a key as a string, or an object (told apart before validation, so an
# error names the entry's own fields, not each form it could have been; see _format_location).
_PLAIN, _OBJECT = "<a plain key>", "<a key object>"
ApiKeyEntry = Annotated[
    Annotated[str, Tag(_PLAIN)] | Annotated[ApiKeySettings, Tag(_OBJECT)],
    Discriminator(
        lambda entry: _PLAIN if isinstance(entry, str) else _OBJECT if isinstance(entry, (dict, ApiKeySettings)) else None,
        custom_error_type="api_key_entry",
        custom_error_message="a key, or an object {name, key | key_env, role, limits}",
    ),
]


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    max_body_mb: PositiveFloat = 32
    # Non-empty ⇒ every endpoint but /healthz needs `Authorization: Bearer <key>`. Each entry a key
    # (a user named key-<6 hex of a digest of it>) or {name, key | key_env, role: user | admin}.
    api_keys: list[ApiKeyEntry] = Field(default_factory=list)
    # A non-loopback host without api_keys is refused unless this is true.
    allow_unauthenticated_remote: bool = False
    # On SIGTERM, in-flight requests get this long to finish.
    drain_timeout_seconds: PositiveFloat = 30
    # Deepest JSON nesting a body may have (arrays and objects, the body itself is 1).
    # At most 200: the proxy must be able to serialise again every body it accepts.
    max_json_depth: Annotated[int, Field(ge=8, le=200)] = 128
    # Request bodies held at once, all requests together; beyond it ⇒ 503 with Retry-After.
    max_bodies_in_flight_mb: PositiveFloat = 256
    # Request bytes each endpoint keeps of the bodies it accepted last, for the next turn of each
    # conversation to be parsed from what it adds (router.core.resent_prefix); 0 turns it off.
    resent_bodies_mb: Annotated[float, Field(ge=0)] = 32
    # Once no request has come or been in flight for this long, those bodies are forgotten and their
    # memory handed back to the system (a parsed body takes ~5x its bytes); the next turn is parsed whole.
    resent_bodies_idle_seconds: PositiveFloat = 30
    # Reading one request body, from its first byte to its last (a trickling body is cut).
    body_timeout_seconds: PositiveFloat = 60
    # A request head (request line and headers) must be complete this long after the connection
    # opened or its first byte came; else the connection is closed (router/http/connections.py).
    head_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10
    # An idle kept-alive client connection is closed after this long without a request.
    keepalive_timeout_seconds: PositiveFloat = 75
    # Open client connections per process; at the cap a new one closes the oldest one waiting for a
    # head (else the oldest idle one); only when all are busy is it refused (503).
    max_connections: Annotated[int, Field(ge=16)] = 1024
    # The event loop `serve` runs on: uvloop (less CPU per request), or the standard library's.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"

    @field_validator("api_keys")
    @classmethod
    def _no_empty_keys(cls, keys: list[str | ApiKeySettings]) -> list[str | ApiKeySettings]:
        if any(isinstance(k, str) and not k.strip() for k in keys):
            raise ValueError("an API key is empty (is its ${ENV_VAR} unset?)")
        names = [_key_name(k) for k in keys]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"two keys are named {twice[0]!r} (a key listed twice? name each key itself: {{name, key}})")
        written = [k if isinstance(k, str) else k.key for k in keys]
        if any(k is not None and written.count(k) > 1 for k in written):
            raise ValueError("the same key is listed twice under two names")
        return keys

    def client_keys(self) -> list[tuple[Tenant, str]]:
        """Each configured key with the tenant it authenticates as; a ``key_env`` read now.

        Raises ConfigError naming the key whose ``key_env`` variable is unset or empty (a key that
        cannot be read would lock its user out without a word), or two keys that turn out to be the
        same key (the second could never authenticate as itself)."""
        keys: list[tuple[Tenant, str]] = []
        for entry in self.api_keys:
            if isinstance(entry, str):
                keys.append((Tenant(plain_key_name(entry)), entry))
                continue
            secret = entry.secret()
            if secret is None or not secret.strip():
                raise ConfigError(f"server.api_keys: key {entry.name!r}: ${entry.key_env} is not set")
            if same := next((tenant.name for tenant, other in keys if other == secret), None):
                raise ConfigError(f"server.api_keys: keys {same!r} and {entry.name!r} are the same key")
            keys.append((Tenant(entry.name, entry.role), secret))
        return keys

    def tenants(self) -> list[Tenant]:
        """The configured keys as tenants (names and roles), without reading any key."""
        return [Tenant(_key_name(k)) if isinstance(k, str) else Tenant(k.name, k.role) for k in self.api_keys]

    def key_limits(self) -> dict[str, KeyLimits]:
        """Each configured key's limits by its name (a plain key, or an object without ``limits``: none)."""
        return {
            _key_name(k): k.limits.limits() if isinstance(k, ApiKeySettings) and k.limits is not None else NO_LIMITS
            for k in self.api_keys
        }

    def key_names(self) -> list[str]:
        """The configured keys' names (the only values of a metric's ``client`` label)."""
        return [_key_name(k) for k in self.api_keys]

    max_body_bytes = _in_bytes("max_body_mb")
    max_bodies_in_flight_bytes = _in_bytes("max_bodies_in_flight_mb")
    resent_bodies_bytes = _in_bytes("resent_bodies_mb")

    @model_validator(mode="after")
    def _one_body_fits_in_flight(self) -> ServerSettings:
        if self.max_bodies_in_flight_mb < self.max_body_mb:
            raise ValueError(f"max_bodies_in_flight_mb: {self.max_bodies_in_flight_mb:g} is less than max_body_mb {self.max_body_mb:g}")
        return self


class ProviderSettings(_Strict):
    base_url: AnyHttpUrl
    # `openai`: OpenAI-compatible chat completions at {base_url}/chat/completions.
    # `ollama`: base_url is Ollama's root or its /v1; chat still uses the
    # OpenAI-compatible endpoint, the classifier uses native /api/chat.
    # `anthropic`: the Anthropic Messages API at {base_url}/v1/messages, key as x-api-key
    # (router/providers/anthropic.py).
    # `gemini`: the Gemini API's generateContent at {base_url}/v1beta/models/{model}:…, key as
    # x-goog-api-key (router/providers/gemini.py).
    api: Literal["openai", "ollama", "anthropic", "gemini"] = "openai"
    # Name of the environment variable holding the provider's key (never the key).
    api_key_env: str | None = None
    # Extra headers sent to this provider (e.g. an organisation id).
    headers: dict[str, str] = Field(default_factory=dict)
    # How long this provider keeps a prompt prefix cached after the last request that used it:
    # None ⇒ the default for its `api` (router.core.cache_timing.DEFAULT_CACHE_LIFETIME_SECONDS);
    # 0 ⇒ it caches nothing. Pinch compresses beyond its budget when the cache is cold anyway.
    cache_lifetime_seconds: Annotated[float, Field(ge=0)] | None = None
    # Send the session key as `prompt_cache_key` when the client sends none (OpenAI routes its
    # prompt cache by it); a client's own `prompt_cache_key` is always kept.
    set_prompt_cache_key: bool = False
    # `api: ollama` only: chat through Ollama's native /api/chat with options.num_ctx = the model's
    # context_window (its OpenAI-compatible endpoint ignores num_ctx and truncates to the loaded window).
    native_chat: bool = False
    # `api: openai` only: `openai-responses` ⇒ the provider speaks the OpenAI Responses API
    # ({base_url}/responses, e.g. OpenAI's own): Responses requests pass through to it unchanged
    # but for what the proxy changed. Chat-completions requests cannot be sent to it.
    wire: Literal["openai-chat", "openai-responses"] = "openai-chat"
    # Where a request translated to this provider's chat may put system messages: `leading` ⇒ one
    # system message, first (what strict chat templates accept; later system content is merged into
    # it, in order); `anywhere` ⇒ where the client put them (router/translate/chat_shape.py).
    system_messages: Literal["leading", "anywhere"] = "leading"

    @model_validator(mode="after")
    def _native_chat_is_ollamas(self) -> ProviderSettings:
        if self.native_chat and self.api != "ollama":
            raise ValueError("native_chat: only an `api: ollama` provider has a native chat endpoint")
        if self.wire != "openai-chat" and self.api != "openai":
            raise ValueError(f"wire: {self.wire} is for an `api: openai` provider")
        return self

    @property
    def url(self) -> str:
        return str(self.base_url).rstrip("/")

    def api_key(self) -> str | None:
        return env_secret(self.api_key_env)


def _key_name(entry: str | ApiKeySettings) -> str:
    return plain_key_name(entry) if isinstance(entry, str) else entry.name


def env_secret(name: str | None) -> str | None:
    """The value of the environment variable ``name`` (read per use, never stored in config)."""
    if name is None:
        return None
    return os.environ.get(name) or None


class ModelSupports(_Strict):
    # Absent ⇒ false: the gate fails closed on anything not declared.
    tools: bool = False
    vision: bool = False
    json_mode: bool = False


class Cost(_Strict):
    """Dollars per million tokens: prompt (``input``), answer (``output``), and the prompt tokens a
    provider reads from its prompt cache (``cache_read``) or writes to it (``cache_write``); either
    unset: the ``input`` price (docs/dashboard.md)."""

    input: Annotated[float, Field(ge=0)] = 0.0
    output: Annotated[float, Field(ge=0)] = 0.0
    cache_read: Annotated[float, Field(ge=0)] | None = None
    cache_write: Annotated[float, Field(ge=0)] | None = None


class ModelSettings(_Strict):
    name: Annotated[str, Field(min_length=1)]
    provider: str
    upstream_model: Annotated[str, Field(min_length=1)]
    context_window: PositiveInt
    max_output_tokens: PositiveInt
    supports: ModelSupports = Field(default_factory=ModelSupports)
    tool_proficiency: Fraction = 0.0
    tiers: Annotated[list[int], Field(min_length=1)]
    quality: Fraction = 0.5
    cost_per_mtok: Cost = Field(default_factory=Cost)
    # Anthropic clients routed to this (OpenAI-chat) model: their thinking goes back as
    # `reasoning_content` and its `reasoning_content` comes back as thinking blocks — for models
    # that require their reasoning returned on tool-call turns (DeepSeek's and the like). Off:
    # thinking is dropped in the translation.
    reasoning_content: bool = False
    # How an `api: anthropic` model takes thinking switched off for one request (a session that
    # reached it mid tool loop without Anthropic's thinking): `omit` leaves `thinking` out (models
    # that think only when asked), `disabled` sends {"type": "disabled"} (models that think by
    # default but accept it), `between_tools` sends {"type": "between_tools"} (models that refuse
    # `disabled` and take this as their lowest setting).
    thinking_off: Literal["omit", "disabled", "between_tools"] = "omit"
    # Whether this `api: anthropic` model checks the prefix of the signed thinking sent back
    # (Anthropic's preserved thinking): then the thinking blocks whose prefix pinch changed are
    # left out. None: as Anthropic documents it for the upstream model id (Claude Fable 5.1/5.2,
    # Mythos 5.1/5.2, Opus/Sonnet/Haiku 5.5). On an `api: gemini` model (Google documents no such
    # check), true sends the thought signatures after a changed result as Google's placeholder.
    thinking_binding: bool | None = None

    @property
    def binds_thinking(self) -> bool:
        """``thinking_binding`` as configured, else as Anthropic documents it for ``upstream_model``."""
        return binds_thinking(self.upstream_model, self.thinking_binding)


class RoutingSettings(_Strict):
    aliases: list[str] = Field(default_factory=lambda: ["auto"])
    # Requested model names (glob patterns, case-insensitive, first match wins) that route like an
    # alias, each with a tier hint: a tier of `tiers` (the client asked for that class of model), or
    # `auto` (the classified tier). A catalogue model's name still pins (router/core/model_families.py).
    model_families: dict[str, int | Literal["auto"]] = Field(default_factory=dict)
    categories: Annotated[dict[str, str], Field(min_length=1)] = Field(
        default_factory=lambda: {
            "coding_general": "writing or changing code",
            "debugging": "finding and fixing a failure",
            "docs_writing": "prose, docs, comments",
        }
    )
    tiers: Annotated[list[int], Field(min_length=1)] = Field(default_factory=lambda: [1, 2, 3])
    fallback_category: str = "coding_general"
    fallback_tier: int = 2
    min_tool_proficiency: Fraction = 0.0
    # Room a model's context window must leave for the answer: a model fits a request when
    # prompt tokens + this <= context_window (the client's max_tokens is clamped, not added).
    min_output_tokens: PositiveInt = 1024
    # What a requested output (max_tokens / max_completion_tokens) above a model's limit does:
    # `clamp` sends the most the chosen model can give (its max_output_tokens, and what its window
    # leaves after the prompt); `reject` rejects such models, and the prompt plus the whole
    # request must fit the window.
    output_limit: Literal["clamp", "reject"] = "clamp"

    @model_validator(mode="after")
    def _fallbacks_known(self) -> RoutingSettings:
        if len(set(self.tiers)) != len(self.tiers):
            raise ValueError("tiers: duplicate tier")
        if self.fallback_category not in self.categories:
            raise ValueError(
                f"fallback_category: {self.fallback_category!r} is not one of the categories "
                f"({', '.join(self.categories)})"
            )
        if self.fallback_tier not in self.tiers:
            raise ValueError(f"fallback_tier: {self.fallback_tier} is not one of the tiers {self.tiers}")
        for pattern, tier in self.model_families.items():
            if not pattern.strip():
                raise ValueError("model_families: an empty pattern")
            if isinstance(tier, int) and tier not in self.tiers:
                raise ValueError(f"model_families.{pattern}: tier {tier} is not one of the tiers {self.tiers} (or auto)")
        return self


class SessionSettings(_Strict):
    # Client headers that name a session explicitly, first match wins. Without
    # one, the session is a fingerprint of the opening messages.
    headers: list[str] = Field(default_factory=lambda: list(DEFAULT_SESSION_HEADERS))


class ClassifierSettings(_Strict):
    # A key of `providers`; its `api` picks the wire format (`ollama` ⇒ native /api/chat).
    provider: str = "ollama"
    model: Annotated[str, Field(min_length=1)] = "qwen2.5:3b"
    # The whole classification; on expiry the request goes on with the fallback.
    timeout_seconds: PositiveFloat = 5
    # Ollama only: the context window the classifier model is loaded with.
    num_ctx: PositiveInt = 4096
    # Each part of the turn text (task head, current step) is cut to this size.
    max_input_chars: PositiveInt = 2000


class SessionCacheSettings(_Strict):
    # Classify a session once and reuse its category and tier for later turns.
    enabled: bool = False
    # An entry older than this is a miss and is reclassified (reads never renew it).
    staleness_minutes: PositiveFloat = 20
    max_entries: PositiveInt = 10_000


class RelevanceSettings(_Strict):
    # Rank old tool results by embedding similarity to the turn (needs pinch.enabled).
    enabled: bool = False
    # The embedding model's name at the endpoint.
    model: Annotated[str, Field(min_length=1)] = "nomic-embed-text"
    # A key of `providers` (its `api`, `base_url`, key and headers), like classifier.provider. Unset ⇒
    # the older base_url / api / api_key_env below, kept working (README: migration note).
    provider: str | None = None
    base_url: AnyHttpUrl = AnyHttpUrl("http://localhost:11434/v1")
    # `openai`: POST {base_url}/embeddings; `ollama`: POST {base_url root}/api/embed; `local`: in-process on the
    # CPU from all-MiniLM-L6-v2's files (the `local-embeddings` extra, or local_model_path), see local_model.
    api: Literal["openai", "ollama", "local"] = "openai"
    # api local: `static` averages the model's token embedding table (~7 ms a batch of 31 results, ~40 MB);
    # `minilm` runs the whole int8 network (~400× the time, ~1 GB while it runs). docs/relevance.md: the figures.
    local_model: Literal["static", "minilm"] = "static"
    # api local: a folder with model.onnx and tokenizer.json instead of the packaged model.
    local_model_path: str | None = None
    # Name of the environment variable holding the endpoint's key (sent as a Bearer token).
    api_key_env: str | None = None
    # The whole ranking (one embeddings call); on expiry pinch prunes uniformly.
    timeout_seconds: PositiveFloat = 10
    # Fewer trim candidates than this ⇒ no embeddings call, uniform prune.
    min_candidates: PositiveInt = 2
    # Each candidate's text is cut to this size before embedding.
    max_candidate_chars: PositiveInt = 4000
    # Embeddings kept in memory (LRU), keyed by model and content hash.
    cache_entries: PositiveInt = 20_000
    # At a cold-cache moment, plan the ledger afresh in relevance order: results it compressed come back
    # verbatim when the order wants them and the budget allows. Off: measured at cold gaps, the uniform
    # prune kept more of what later steps refer to (docs/relevance.md, "Restore at cold moments").
    restore: bool = False


Count = Annotated[int, Field(ge=0)]
_FIRST_SIGHT = FirstSightSettings()  # the core's defaults, tuned on the shared transcripts (bench/bench_first_sight.py)


class FirstSightConfig(_Strict):
    # A tool result sent for the first time (in no prompt cache yet) is reduced once, losslessly, and
    # resent as those bytes ever after (needs pinch.ledger and a session key): terminal noise, runs of
    # repeated lines, and what an earlier result shows already (a pointer naming that call, or a diff).
    enabled: bool = True
    # Past long_output_chars, a new output is cut to its head_chars and tail_chars, its error lines and up to
    # relevant_chars of the lines naming the task; the whole stays one pinch_retrieve call away (the proxy
    # offers the tool and answers it itself: docs/pinch.md). Only for a client that offers tools.
    lossy: bool = True
    long_output_chars: PositiveInt = _FIRST_SIGHT.long_output_chars
    head_chars: Count = _FIRST_SIGHT.head_chars
    tail_chars: Count = _FIRST_SIGHT.tail_chars
    relevant_chars: Count = _FIRST_SIGHT.relevant_chars
    # A reduction is made only when it saves this many tokens and this share of the result.
    min_saved_tokens: Count = _FIRST_SIGHT.min_saved_tokens
    min_saved_share: Annotated[float, Field(ge=0, lt=1)] = _FIRST_SIGHT.min_saved_share
    # Repeated lines: blocks of up to this many lines fold with their count.
    max_period: PositiveInt = _FIRST_SIGHT.max_period
    # Already in context: a run of at least this many lines and characters becomes a pointer; only lines
    # of at least min_anchor_chars characters start a match, each remembered at its max_occurrences latest places.
    min_run_lines: PositiveInt = _FIRST_SIGHT.min_run_lines
    min_run_chars: Count = _FIRST_SIGHT.min_run_chars
    min_anchor_chars: PositiveInt = _FIRST_SIGHT.min_anchor_chars
    max_occurrences: PositiveInt = _FIRST_SIGHT.max_occurrences
    # A diff is tried against results of at most diff_max_lines lines, changed in at most diff_max_edits
    # lines, shown with diff_context lines of context.
    diff_max_lines: Count = _FIRST_SIGHT.diff_max_lines
    diff_max_edits: Count = _FIRST_SIGHT.diff_max_edits
    diff_context: Count = _FIRST_SIGHT.diff_context
    # A pointer names the earlier call (its tool and arguments) in at most this many characters.
    max_label_chars: PositiveInt = _FIRST_SIGHT.max_label_chars

    def core(self) -> FirstSightSettings | None:
        """The settings as the core reads them; None when first sight is off."""
        if not self.enabled:
            return None
        return FirstSightSettings(**self.model_dump(exclude={"enabled"}))


class PinchSettings(_Strict):
    enabled: bool = False
    budget_tokens: PositiveInt = 50_000
    keep_last_turns: PositiveInt = 4
    # Room for a head, a tail and the marker between them (the minimum comes from the marker's size).
    max_summarize_chars: Annotated[int, Field(ge=MIN_SUMMARIZE_CHARS)] = 4000
    relevance: RelevanceSettings = Field(default_factory=RelevanceSettings)
    # The session's pinch ledger: a result once compressed is sent as the same bytes on every
    # later request of the session, and new results are compressed in batches timed by the
    # provider's cache. False ⇒ every request is pruned afresh to the budget.
    ledger: bool = True
    # A batch compresses new results until the prompt is down to this fraction of the budget
    # (or of the model's window when that is smaller), so one rewrite buys many turns.
    low_watermark: Annotated[float, Field(gt=0, le=1)] = 0.6
    # On a cold cache a batch is made once the prompt passes this fraction of the budget, before it
    # is over: the rewrite is free now, and once the budget is crossed on a warm cache it is not. 1 = never early.
    cold_batch_from: Annotated[float, Field(gt=0, le=1)] = 0.9
    # With a provider that caches nothing a batch stops at this fraction of the budget: 1 = at the
    # budget (no more lost than the budget asks); lower sends fewer tokens and keeps fewer results verbatim.
    no_cache_watermark: Annotated[float, Field(gt=0, le=1)] = 1.0
    # A session's ledger is forgotten this long after its last request (a miss means one fresh batch).
    ledger_ttl_minutes: PositiveFloat = 1440
    # Sessions whose ledger is kept in memory (LRU).
    ledger_max_sessions: PositiveInt = 10_000
    first_sight: FirstSightConfig = Field(default_factory=FirstSightConfig)

    @model_validator(mode="after")
    def _relevance_needs_pinch(self) -> PinchSettings:
        if self.relevance.enabled and not self.enabled:
            raise ValueError("relevance.enabled: needs pinch.enabled: true as well")
        return self


class TokenSettings(_Strict):
    # Every image part counts this many tokens, whatever its size.
    image_tokens: Annotated[int, Field(ge=0)] = 1000
    # Added per message for role and framing.
    per_message_overhead: Annotated[int, Field(ge=0)] = 4


class BreakerSettings(_Strict):
    # A provider that gave no answer at all (its connection refused or not made in time, no first
    # byte within the timeout) is marked down: every request skips it for this long, then one request
    # tries it again, and its answer (any status) closes the breaker. 0: never marked down (a request
    # still tries no other model on a provider that just timed out). Per process: with `serve
    # --workers N` each worker keeps its own, and finds a silent provider once.
    open_seconds: Annotated[float, Field(ge=0)] = 30


class UpstreamSettings(_Strict):
    connect_timeout_seconds: PositiveFloat = 5
    # Until the first byte: a non-stream answer's head, a stream's first event.
    first_byte_timeout_seconds: PositiveFloat = 120
    # Until a stream's head (its status line), never longer than first_byte_timeout_seconds: a live
    # provider sends it at once, and may then think for minutes before its first event (OpenAI's chat
    # completions stream nothing while a reasoning model reasons), which first_byte_timeout_seconds
    # still bounds. Ollama sends its head with the first token, after loading the model and reading
    # the prompt: give it as long as a first byte (the shipped config does).
    stream_first_byte_timeout_seconds: PositiveFloat = 30
    idle_timeout_seconds: PositiveFloat = 60
    # Candidates tried before the first byte reaches the client.
    max_attempts: PositiveInt = 2
    # A 429/503 Retry-After up to this long is waited out before retrying
    # that provider; a longer one skips the provider for this request.
    max_retry_after_seconds: Annotated[float, Field(ge=0)] = 10
    # Open connections to all providers together; more requests wait for one.
    max_connections: PositiveInt = 512
    # Any dependency's answer body (chat, classifier, embeddings), after decoding gzip/deflate.
    max_response_mb: PositiveFloat = 64
    # One SSE event of a stream; a longer one (or a line that never ends) breaks the stream.
    max_stream_event_mb: PositiveFloat = 8
    # A stream client that takes longer than this to accept a chunk is dropped, freeing its upstream.
    client_write_timeout_seconds: PositiveFloat = 30
    # A stream the client has received nothing of for this long gets the client's format's
    # keep-alive (Anthropic's ping event, an SSE comment otherwise), so idle timeouts of clients
    # and proxies in between do not cut a long prefill or thinking; 0: never.
    stream_keepalive_seconds: Annotated[float, Field(ge=0)] = 10
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)

    @property
    def stream_head_timeout_seconds(self) -> float:
        """How long a stream's head may take: its own timeout, bounded by the first byte's."""
        return min(self.stream_first_byte_timeout_seconds, self.first_byte_timeout_seconds)

    max_response_bytes = _in_bytes("max_response_mb")
    max_stream_event_bytes = _in_bytes("max_stream_event_mb")


class DecisionLogSettings(_Strict):
    enabled: bool = True
    # SQLite file (created owner-only on start, WAL mode); a relative path is inside the
    # state directory (--state-dir, $PINCH_ROUTER_STATE_DIR, ~/.local/state/pinch-router).
    path: str = "decisions.sqlite3"
    # Rows waiting to be written; when full, new rows are dropped and counted, never waited for.
    queue_size: PositiveInt = 10_000
    batch_size: PositiveInt = 256
    # A batch is written when full or this long after its first row.
    flush_interval_seconds: PositiveFloat = 0.5


class EscalationSettings(_Strict):
    # After `failures` failed outcomes (POST /v1/outcome) of one session within
    # `window_minutes`, its later requests route one tier up until the window passes.
    enabled: bool = True
    failures: PositiveInt = 3
    window_minutes: PositiveFloat = 30


class RedisSettings(_Strict):
    # redis:// or rediss:// (a password in the URL may be ${ENV}); unix:// for a socket.
    url: str = "redis://127.0.0.1:6379/0"
    # Every key starts with "<namespace>:", so several proxies (or other programs) can share one Redis.
    namespace: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")] = "pinch-router"
    # Each call's bound; past it the request goes on with the in-process store.
    timeout_ms: Annotated[int, Field(gt=0, le=5000)] = 250
    # While Redis is unreachable, how often it is tried again in the background.
    retry_seconds: PositiveFloat = 1.0

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: str) -> str:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return url


class StateSettings(_Strict):
    # Where session state lives (classifications, pinch ledgers, escalation, request ids):
    # "memory" in this process, or "redis", shared by every worker and replica.
    backend: Literal["memory", "redis"] = "memory"
    redis: RedisSettings = Field(default_factory=RedisSettings)


class DashboardSettings(_Strict):
    """The web dashboard under /ui/ (docs/dashboard.md): read-only, from the decision log, with the client keys."""

    enabled: bool = True
    # What routing's saving is measured against when the client asked for no priced model (an alias,
    # an agent's default name): a catalogue model's name or a name in reference_prices; none: not measured.
    reference_model: str | None = None
    # Prices of models clients ask for by name that the catalogue does not have (e.g. claude-opus-4-5:
    # the model Claude Code would have used); a name also prices the names that start with it.
    reference_prices: dict[str, Cost] = Field(default_factory=dict)


class LoggingSettings(_Strict):
    level: Literal["debug", "info", "warning", "error"] = "info"


class Config(_Strict):
    """The file's schema as far as this module knows it. What ``serve`` reads is its extension by the stage
    registry (:meth:`router.server.registry.StageRegistry.config_schema`): ``middlewares`` defaults to every
    registered stage in order, and a stage's own section, when this schema lacks it, is a key of its own."""

    server: ServerSettings = Field(default_factory=ServerSettings)
    middlewares: Annotated[list[str], Field(min_length=1)]  # the chain, in order
    providers: Annotated[dict[str, ProviderSettings], Field(min_length=1)]
    models: Annotated[list[ModelSettings], Field(min_length=1)]
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    session: SessionSettings = Field(default_factory=SessionSettings)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    session_cache: SessionCacheSettings = Field(default_factory=SessionCacheSettings)
    pinch: PinchSettings = Field(default_factory=PinchSettings)
    tokens: TokenSettings = Field(default_factory=TokenSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    decision_log: DecisionLogSettings = Field(default_factory=DecisionLogSettings)
    escalation: EscalationSettings = Field(default_factory=EscalationSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)

    @model_validator(mode="after")
    def _cross_references(self) -> Config:
        problems: list[str] = []
        seen: set[str] = set()
        for i, model in enumerate(self.models):
            where = f"models[{i}]"
            if model.name in seen:
                problems.append(f"{where}.name: duplicate model name {model.name!r}")
            seen.add(model.name)
            if model.name in self.routing.aliases:
                problems.append(f"{where}.name: {model.name!r} is also a routing alias")
            if model.provider not in self.providers:
                problems.append(
                    f"{where}.provider: unknown provider {model.provider!r} "
                    f"(known: {', '.join(self.providers)})"
                )
            unknown_tiers = [t for t in model.tiers if t not in self.routing.tiers]
            if unknown_tiers:
                problems.append(f"{where}.tiers: {unknown_tiers} not in routing.tiers {self.routing.tiers}")
        if "classifier" in self.middlewares and self.classifier.provider not in self.providers:
            problems.append(
                f"classifier.provider: unknown provider {self.classifier.provider!r} "
                f"(known: {', '.join(self.providers)})"
            )
        relevance_provider = self.pinch.relevance.provider
        if relevance_provider is not None and relevance_provider not in self.providers:
            problems.append(
                f"pinch.relevance.provider: unknown provider {relevance_provider!r} (known: {', '.join(self.providers)})"
            )
        elif relevance_provider is not None and self.providers[relevance_provider].api in ("anthropic", "gemini"):
            api = self.providers[relevance_provider].api
            problems.append(f"pinch.relevance.provider: {relevance_provider!r} is `api: {api}`, which has no embeddings API the proxy speaks")
        reference = self.dashboard.reference_model
        if reference is not None and reference not in seen and reference not in self.dashboard.reference_prices:
            problems.append(f"dashboard.reference_model: {reference!r} is neither a model of the catalogue nor a name in dashboard.reference_prices")
        problems += providers_looping_back(self.server.host, self.server.port, self.providers)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def embeddings_provider(self) -> ProviderSettings:
        """Where relevance embeddings are asked: ``pinch.relevance.provider``, else its older
        ``base_url`` / ``api`` / ``api_key_env`` keys as a provider of their own."""
        relevance = self.pinch.relevance
        if relevance.provider is not None:
            return self.providers[relevance.provider]
        # api local asks no provider: this one is never called (the stage embeds in-process)
        api = "openai" if relevance.api == "local" else relevance.api
        return ProviderSettings(base_url=relevance.base_url, api=api, api_key_env=relevance.api_key_env)

    def model_by_name(self, name: str) -> ModelSettings | None:
        return next((m for m in self.models if m.name == name), None)


@dataclass(frozen=True, slots=True)
class Catalogue:
    """What every routing decision reads, read-only: the models, their providers, the routing rules,
    where relevance embeds, and the bound on any answer read from a provider. A stage is built with
    this and its own settings section, never the whole :class:`Config` (:class:`router.server.registry.Offered`)."""

    models: tuple[ModelSettings, ...]
    providers: Mapping[str, ProviderSettings]
    routing: RoutingSettings
    embeddings_provider: ProviderSettings
    max_response_bytes: int

    @classmethod
    def of(cls, config: Config) -> Catalogue:
        return cls(tuple(config.models), MappingProxyType(dict(config.providers)), config.routing, config.embeddings_provider(), config.upstream.max_response_bytes)

    def model_by_name(self, name: str) -> ModelSettings | None:
        return next((m for m in self.models if m.name == name), None)


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "::", "[::]"})


def _same_host(a: str, b: str) -> bool:
    """Whether two host names reach the same listener (every loopback name, and the any-address, do)."""
    a, b = a.lower(), b.lower()
    return a == b or (_is_local(a) and _is_local(b))


def _is_local(host: str) -> bool:
    return host in _LOOPBACK_NAMES or host.startswith("127.")


def providers_looping_back(host: str, port: int, providers: dict[str, ProviderSettings]) -> list[str]:
    """A provider on the proxy's own ``host``:``port`` would send every request back into the proxy.

    Checked at load for ``server.host``/``port``, and again by ``serve`` for the address it
    really listens on (``--host``/``--port`` or the environment may differ from the file).
    """
    return [
        f"providers.{name}.base_url: {provider.url} is this proxy itself (its own address, {host} port {port}): requests would loop"
        for name, provider in providers.items()
        if provider.base_url.port == port and _same_host(provider.base_url.host or "", host)
    ]


def config_secrets(config: Config) -> list[str | None]:
    """Every secret the proxy holds: provider keys, the embeddings key, client keys."""
    return [
        *(provider.api_key() for provider in config.providers.values()),
        env_secret(config.pinch.relevance.api_key_env),
        *(key if isinstance(key, str) else key.secret() for key in config.server.api_keys),
    ]


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(node: Any, environ: dict[str, str] | os._Environ[str], path: str = "") -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of a YAML tree."""
    if isinstance(node, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            value = environ.get(name)
            if value is None:
                if default is None:
                    raise ConfigError(f"{path or '<root>'}: environment variable {name} is not set")
                return default
            return value

        return _ENV_REF.sub(substitute, node)
    if isinstance(node, dict):
        return {k: expand_env(v, environ, _join(path, str(k))) for k, v in node.items()}
    if isinstance(node, list):
        return [expand_env(v, environ, f"{path}[{i}]") for i, v in enumerate(node)]
    return node


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _format_location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if part in (_PLAIN, _OBJECT):  # which form of a server.api_keys entry: not a key of the file
            continue
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part))
    return path


def format_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors(include_url=False):
        where = _format_location(tuple(item["loc"]))
        message = item["msg"].removeprefix("Value error, ")
        if where:
            lines.append(f"{where}: {message}")
        elif ": " in message:  # cross-field problems already carry their paths
            lines.extend(message.split("; "))
        else:
            lines.append(message)
    return "\n".join(lines)


C = TypeVar("C", bound=Config)


def parse_config(raw: Any, environ: dict[str, str] | None = None, schema: type[C] = Config) -> C:  # type: ignore[assignment]
    """Validate an already-loaded YAML tree (after env expansion) against ``schema``: :class:`Config`, or
    the stage registry's extension of it."""
    if not isinstance(raw, dict):
        raise ConfigError("<root>: the configuration must be a mapping of keys")
    expanded = expand_env(raw, os.environ if environ is None else environ)
    try:
        return schema.model_validate(expanded)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error)) from None


def load_config(path: str | Path, environ: dict[str, str] | None = None, schema: type[C] = Config) -> C:  # type: ignore[assignment]
    """Read, expand and validate a YAML config file against ``schema``; raise ConfigError on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror or error})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    return parse_config(raw, environ, schema)
