"""RequestContext: the typed record one request carries through the chain (ARCHITECTURE §3). The edge
fills the request fields once; each stage writes its own slots (its ``provides``) with frozen results:
the built-in stages' fields below (:mod:`router.core.results`), any other stage's a :class:`Slot` it
declares in its own module. A stage reads the view only; the wire adapter alone reads the body."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiohttp import web

from router.core.errors import JSON, ApiError

if TYPE_CHECKING:
    from multidict import CIMultiDictProxy

    from router.core.request_view import RequestView, Rewrites
    from router.core.resent_prefix import KnownBody
    from router.core.results import Capabilities, Classification, PinchStats, Relevance, Route, SessionKey, StageRecord, UpstreamResult
    from router.core.session_state import SessionSnapshot
    from router.core.tokens import PromptSize, TokenEstimator
    from router.wire import WireAdapter

# Lets the edge and the decision log read which error a response carried without parsing it.
ERROR_CODE_KEY = web.ResponseKey("pinch_router_error_code", str)
T = TypeVar("T")


@dataclass(frozen=True, eq=False, slots=True)
class Slot(Generic[T]):
    """A stage's slot declared in its own module, typed as aiohttp's ``web.AppKey``: ``ctx[SLOT]`` reads it
    (None until written), ``ctx[SLOT] = value`` writes it; ``name`` is what its stage ``provides``."""

    name: str
    type: type[T]


@dataclass(slots=True)
class RequestContext:
    """Everything one LLM request carries through the chain. ``client``: the aiohttp request, for the
    terminal stage to stream the answer (None when the chain runs without one: ``explain``)."""

    request_id: str
    received_at: float  # wall clock, seconds since the epoch
    started: float  # perf_counter at arrival, for durations
    headers: CIMultiDictProxy[str]
    body: dict[str, Any]
    view: RequestView
    wire: WireAdapter
    client: web.Request | None
    client_id: str | None = None  # the name of the client key it authenticated with (never the key); None: no keys
    session: SessionKey | None = None
    # the session's stored values every stage reads, read in one round trip (None: not read)
    session_state: SessionSnapshot | None = None
    # classification-cache: the session's stored classification, for the classifier to use
    cached_classification: Classification | None = None
    # classifier: the one classification the request is routed on
    classification: Classification | None = None
    relevance: Relevance | None = None
    pinch: PinchStats | None = None
    # pinch's compressed tool results by position in view.conversation.tool_results(); None: none
    rewrites: Rewrites | None = None
    capabilities: Capabilities | None = None
    route: Route | None = None
    upstream: UpstreamResult | None = None
    response: web.StreamResponse | None = None
    prompt_size: PromptSize | None = None  # see measured_prompt
    known_body: KnownBody | None = None  # the edge: the body kept for the next turn (router.core.resent_prefix)
    trace: list[StageRecord] = field(default_factory=list)
    upstream_wait: float = 0.0  # seconds spent waiting on upstreams, told apart from the proxy's own time
    overhead_ms: float | None = None  # the proxy's own time when the response head went out
    declared: dict[Slot[Any], Any] | None = None  # the declared slots written so far (ctx[SLOT])

    def __getitem__(self, slot: Slot[T]) -> T | None:
        return None if self.declared is None else self.declared.get(slot)

    def __setitem__(self, slot: Slot[T], value: T) -> None:
        self.declared = {**(self.declared or {}), slot: value}  # a few slots, written once each

    def measured_prompt(self, estimator: TokenEstimator) -> PromptSize:
        """The prompt as the client sent it (the view's units + tool schemas), measured once per
        request: pinch-relevance, pinch-prune and the gate share this one count."""
        if self.prompt_size is None:
            known, view = self.known_body, self.view  # a kept body takes the sizes it shares with the body it resumed
            self.prompt_size = estimator.measure(view.units, view.tools) if known is None else known.measure(estimator, view.units, view.tools, view.reused_units)
        return self.prompt_size

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
        """``error`` as this client's wire format writes it, with the request's id: how every stage refuses."""
        return error_response(self.wire, error, headers, self.request_id)


def error_response(wire: WireAdapter, error: ApiError, headers: dict[str, str] | None = None, request_id: str | None = None) -> web.Response:
    """The response of an error as ``wire`` writes it (``request_id`` where its format carries one), with
    its code kept for the log."""
    answer = wire.render_error(error, request_id)
    response = web.Response(status=answer.status, body=answer.body, content_type=JSON, headers={**dict(answer.headers), **(headers or {})})
    response[ERROR_CODE_KEY] = error.code
    if error.close_connection:
        response.force_close()
    return response


# The fields the edge provides before any stage runs (used by order validation).
EDGE_FIELDS = frozenset({"request_id", "received_at", "headers", "body", "view", "wire", "client_id"})
CTX_KEY = web.RequestKey("pinch_router_ctx", RequestContext)
