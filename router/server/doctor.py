"""`pinch-router doctor`: is everything the config needs actually there?

Checks, each a :class:`Finding` with a fix when it fails:

* every provider a model or the classifier uses answers its model list (where, and how it lists
  them and names what is missing, is its provider module's: ``ProviderAdapter.models_url`` and
  ``.models``) and has each configured model (the fix: the provider's pull command, when it has one);
* every ``api_key_env``, and every client key's ``key_env``, names a variable that is set;
* the classifier and the embeddings model (when their stages are on) answer one
  real call each;
* the state directory and the decision log can be written;
* a proxy already serving at the config's address has no provider marked down by
  its circuit breakers (read from its ``/healthz``; nothing to check when none runs).

``serve`` runs the cheap part (keys and model lists, no model calls) after it
starts listening and logs one warning per problem, never refusing to start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from router.clients.classifier import ClassifierClient, ClassifierError
from router.providers import PROVIDER_ADAPTERS, provider_adapter
from router.config import Config, ProviderSettings, env_secret
from router.core.classification import InvalidAnswer, classifier_messages, parse_classifier_answer
from router.core.turn_text import TurnText
from router.clients.embeddings import EmbeddingsClient, EmbeddingsError
from router.clients.local_embeddings import INSTALL_HINT, MODEL_IDS, LocalEmbedder
from router.clients.local_embeddings import missing as local_missing
from router.server.locations import LocationError, prepare_state
from router.state.session_store import redis_store
from router.clients.dependency_http import error_summary

log = logging.getLogger("pinch_router.doctor")

# Model lists are cheap: a provider that does not answer within this is reported down.
LIST_TIMEOUT_SECONDS = 5.0
# A proxy running at the config's address answers /healthz in milliseconds, if it runs at all.
PROXY_TIMEOUT_SECONDS = 2.0
# What `pinch-router mock-upstream`'s model lists carry (router.tools.mock_upstream.MOCK_HEADER; the
# server never imports the tools): a provider that sends it is the mock, which answers every model.
MOCK_HEADER = "x-pinch-router-mock"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str  # what was looked at: "provider local", "model qwen3:14b"
    ok: bool
    detail: str
    fix: str = ""


def needed_models(config: Config) -> dict[str, list[str]]:
    """Per provider, the upstream model names the config sends it (chat models, then the classifier's)."""
    needed: dict[str, list[str]] = {name: [] for name in config.providers}
    for model in config.models:
        if model.upstream_model not in needed[model.provider]:
            needed[model.provider].append(model.upstream_model)
    if "classifier" in config.middlewares and config.classifier.model not in needed[config.classifier.provider]:
        needed[config.classifier.provider].append(config.classifier.model)
    return needed


def pull_commands(config: Config) -> list[str]:
    """The command that fetches each model the config expects from a provider that has one (its
    ``ModelListing.pull``), the embeddings model included when on."""
    wanted = [(provider_adapter(config.providers[name]), m) for name, models in needed_models(config).items() for m in models]
    relevance = config.pinch.relevance
    embedder = PROVIDER_ADAPTERS.get(relevance.api)  # by the older keys' api (the local model is no provider's)
    if config.pinch.enabled and relevance.enabled and embedder is not None:
        wanted.append((embedder, relevance.model))
    return list(dict.fromkeys(pull(m) for adapter, m in wanted if (pull := adapter.models.pull) is not None))


def key_findings(config: Config) -> list[Finding]:
    """One finding per ``api_key_env`` the config names, and per client key's ``key_env`` (no I/O)."""
    named = [(f"providers.{name}.api_key_env", p.api_key_env) for name, p in config.providers.items() if p.api_key_env]
    relevance = config.pinch.relevance
    if config.pinch.enabled and relevance.enabled and relevance.api_key_env:
        named.append(("pinch.relevance.api_key_env", relevance.api_key_env))
    clients = [(f"server.api_keys {entry.name!r}", entry.key_env) for entry in config.server.api_keys if not isinstance(entry, str) and entry.key_env]
    return [
        Finding(f"key {variable}", True, f"{where}: set")
        if env_secret(variable)
        else Finding(f"key {variable}", False, f"{where}: {variable} is not set; the provider will answer 401", f"export {variable}=...")
        for where, variable in named
    ] + [
        Finding(f"key {variable}", True, f"{where}: set")
        if env_secret(variable)
        else Finding(f"key {variable}", False, f"{where}: {variable} is not set; serve refuses to start without it", f"export {variable}=...")
        for where, variable in clients
    ]


def state_findings(config: Config, directory: Path) -> list[Finding]:
    if not config.decision_log.enabled:
        return [Finding("state", True, "decision log disabled (decision_log.enabled)")]
    try:
        prepare_state(config, directory, probe_only=True)
    except LocationError as error:
        return [Finding("state", False, str(error), "make the directory writable or choose another (--state-dir)")]
    return [Finding("state", True, f"decision log {config.decision_log.path} is writable")]


async def _available_models(http: aiohttp.ClientSession, provider: ProviderSettings) -> tuple[str, set[str] | None]:
    """(the URL asked, the model names it lists — None when it is the mock upstream, which serves any);
    raises ValueError with a readable reason."""
    adapter = provider_adapter(provider)
    url = adapter.models_url(provider)
    try:
        timeout = aiohttp.ClientTimeout(total=LIST_TIMEOUT_SECONDS)
        async with http.get(url, headers=adapter.headers(provider), timeout=timeout, allow_redirects=False) as response:
            body = await response.read()
            status = response.status
            is_mock = MOCK_HEADER in response.headers
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ValueError(f"{url}: cannot connect ({type(exc).__name__})") from None
    if status != 200:
        raise ValueError(f"{url} answered {status}: {error_summary(body)}")
    if is_mock:
        return url, None
    try:
        names = adapter.models.names(orjson.loads(body))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{url}: not a model list ({error_summary(body)})") from None
    return url, names


async def provider_findings(config: Config, http: aiohttp.ClientSession) -> list[Finding]:
    """Each used provider's model list, and each configured model on it."""
    findings: list[Finding] = []
    targets: list[tuple[str, ProviderSettings, list[str]]] = [
        (name, config.providers[name], wanted) for name, wanted in needed_models(config).items() if wanted
    ]
    relevance = config.pinch.relevance
    if config.pinch.enabled and relevance.enabled and _in_process(config):
        problem = local_missing(relevance.local_model_path, relevance.local_model)
        if problem is None:
            findings.append(Finding("embeddings (pinch.relevance)", True, f"{MODEL_IDS[relevance.local_model]} in-process (api: local), installed"))
        else:
            fix = f"{INSTALL_HINT}, or set pinch.relevance.enabled: false (until then old tool results are pruned uniformly)"
            findings.append(Finding("embeddings (pinch.relevance)", False, problem, fix))
    elif config.pinch.enabled and relevance.enabled:
        targets.append(("embeddings (pinch.relevance)", config.embeddings_provider(), [relevance.model]))
    listings = await asyncio.gather(*(_available_models(http, provider) for _, provider, _ in targets), return_exceptions=True)
    for (name, provider, wanted), listing in zip(targets, listings, strict=True):
        if isinstance(listing, BaseException):
            start = provider_adapter(provider).models.start
            findings.append(Finding(f"provider {name}", False, str(listing), f"{start}, or fix its base_url"))
            continue
        url, available = listing
        if available is None:  # the mock answers every model name: nothing to pull
            findings.append(Finding(f"provider {name}", True, f"{url}: the upstream is pinch-router mock-upstream (a stand-in; it answers every model)"))
            findings += [Finding(f"model {model}", True, f"served by the mock upstream at {name}") for model in wanted]
            continue
        findings.append(Finding(f"provider {name}", True, f"{url}: {len(available)} models"))
        models = provider_adapter(provider).models
        for model in wanted:
            if models.listed_name(model) in available:
                findings.append(Finding(f"model {model}", True, f"available at {name}"))
            else:
                fix = models.pull(model) if models.pull is not None else "use a model id the provider lists"
                findings.append(Finding(f"model {model}", False, models.missing(provider, url), fix))
    return findings


async def call_findings(config: Config, http: aiohttp.ClientSession, timeout: float) -> list[Finding]:
    """One real classification and one real embedding, when those stages are on."""
    findings: list[Finding] = []
    if "classifier" in config.middlewares:
        settings = config.classifier
        client = ClassifierClient(http, config.providers[settings.provider], settings)
        messages = classifier_messages(config.routing.categories, config.routing.tiers, TurnText("add a docstring to parse_args", ""))
        try:
            async with asyncio.timeout(timeout):
                reply = await client.ask(messages)
            answer = parse_classifier_answer(reply, config.routing.categories, config.routing.tiers)
        except (ClassifierError, TimeoutError) as error:
            findings.append(Finding("classifier", False, f"{settings.model}: {error or 'no answer in time'}", "see the provider's findings above"))
        else:
            if isinstance(answer, InvalidAnswer):
                findings.append(Finding("classifier", False, f"{settings.model} answered, unusably: {answer.reason}", "try another classifier.model"))
            else:
                findings.append(Finding("classifier", True, f"{settings.model}: {answer.category}, tier {answer.tier}"))
    relevance = config.pinch.relevance
    if config.pinch.enabled and relevance.enabled:
        local = _in_process(config)
        embedder = LocalEmbedder(relevance.local_model_path, relevance.local_model) if local else EmbeddingsClient(http, relevance, provider=config.embeddings_provider())
        name = embedder.model if isinstance(embedder, LocalEmbedder) else relevance.model
        try:
            async with asyncio.timeout(timeout):
                vectors = await embedder.embed(["def parse_args(argv): ..."])
        except (EmbeddingsError, TimeoutError) as error:
            findings.append(Finding("embeddings", False, f"{name}: {error or 'no answer in time'}", "see the embeddings finding above"))
        else:
            findings.append(Finding("embeddings", True, f"{name}: {vectors.shape[1]} dimensions"))
    return findings


def _in_process(config: Config) -> bool:
    """Relevance embeds with the local model (api: local, no provider named), not over HTTP."""
    return config.pinch.relevance.api == "local" and config.pinch.relevance.provider is None


async def state_backend_findings(config: Config) -> list[Finding]:
    """With ``state.backend: redis``: does Redis answer a ping within ``state.redis.timeout_ms``?"""
    if config.state.backend != "redis":
        return []
    settings = config.state.redis
    store = redis_store(settings, on_fallback=lambda: None, on_state=lambda up: None)
    try:
        answers = await store.ping()
    finally:
        await store.close()
    if answers:
        return [Finding("state backend", True, f"redis at {store.where} answers")]
    fix = f"start Redis at {store.where}, fix state.redis.url, or set state.backend: memory (the proxy serves meanwhile, degraded)"
    return [Finding("state backend", False, f"redis at {store.where}: {store.why}", fix)]


async def running_proxy_findings(config: Config, http: aiohttp.ClientSession) -> list[Finding]:
    """What a proxy already serving at ``server.host``/``port`` has marked down: one failing finding
    per provider its breakers skip (``upstream.breaker``), else one saying none is, or none runs.

    Its ``/healthz`` (no key needed) lists them; under ``serve --workers N`` the worker that answers
    speaks for itself (each keeps its own breakers)."""
    host = config.server.host if config.server.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    base = f"http://{f'[{host}]' if ':' in host else host}:{config.server.port}"
    try:
        timeout = aiohttp.ClientTimeout(total=PROXY_TIMEOUT_SECONDS)
        async with http.get(f"{base}/healthz", timeout=timeout, allow_redirects=False) as response:
            health = orjson.loads(await response.read())
    except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
        return [Finding("running proxy", True, f"not running at {base} (while one runs, the providers it marks down show here)")]
    down = health.get("providers_down") if isinstance(health, dict) else None
    if not down:
        return [Finding("running proxy", True, f"{base}: no provider marked down")]
    fix = "it is tried again by itself once the window passes (upstream.breaker.open_seconds); see the provider's own finding above"
    return [
        Finding(
            f"provider {entry.get('provider')} (running proxy)",
            False,
            f"marked down by the proxy at {base}: it gave no answer (connection refused, or no first byte in time); tried again in {entry.get('retry_in_seconds')}s",
            fix,
        )
        for entry in down
        if isinstance(entry, dict)
    ]


async def run_doctor(config: Config, state_dir: Path, call_timeout: float) -> list[Finding]:
    async with aiohttp.ClientSession() as http:
        findings = [*await provider_findings(config, http), *key_findings(config)]
        findings += await call_findings(config, http, call_timeout)
        findings += await running_proxy_findings(config, http)
    return findings + state_findings(config, state_dir) + await state_backend_findings(config)


def render(findings: Iterable[Finding]) -> str:
    rows = [("", "check", "result"), *((("ok" if f.ok else "FAIL"), f.check, f.detail) for f in findings)]
    width = max(len(row[1]) for row in rows)
    lines = [f"{status:<4}  {check:<{width}}  {detail}" for status, check, detail in rows]
    fixes = [f"  {f.check}: {f.fix}" for f in findings if not f.ok and f.fix]
    if fixes:
        lines += ["", "to fix:", *fixes]
    return "\n".join(lines)


async def warn_at_startup(config: Config) -> None:
    """The cheap checks, logged as one warning each; serving goes on whatever they find."""
    async with aiohttp.ClientSession() as http:
        findings = [*key_findings(config), *await provider_findings(config, http)]
    for finding in findings:
        if not finding.ok:
            log.warning("doctor_problem", extra={"check": finding.check, "detail": finding.detail, "fix": finding.fix})
