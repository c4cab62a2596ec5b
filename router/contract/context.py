"""RequestContext: the typed record one request carries through the chain.

The edge fills the request fields once; each stage writes exactly one slot
(ARCHITECTURE §3). Stage results are frozen dataclasses so a later stage cannot
quietly edit an earlier one's decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from router.core.results import (  # re-exported: the slots' types, defined with the cores
    Attempt,
    Candidate,
    Capabilities,
    Classification,
    ClassificationSource,
    Outcome,
    PinchMode,
    PinchStats,
    Rejection,
    Relevance,
    RelevanceStatus,
    Route,
    SessionKey,
    StageRecord,
    Usage,
    UpstreamResult,
)

if TYPE_CHECKING:
    from multidict import CIMultiDictProxy

    from router.core.request_view import RequestView, Rewrites
    from router.core.session_state import SessionSnapshot
    from router.core.tokens import PromptSize, TokenEstimator
    from router.core.turn_text import TurnText
    from router.http.errors import ApiError
    from router.wire import WireAdapter



Message = dict[str, Any]  # an OpenAI chat message (kept for the chat-only tools)

__all__ = [
    "CTX_KEY",
    "EDGE_FIELDS",
    "Attempt",
    "Candidate",
    "Capabilities",
    "Classification",
    "ClassificationSource",
    "Message",
    "Outcome",
    "PinchMode",
    "PinchStats",
    "Rejection",
    "Relevance",
    "RelevanceStatus",
    "RequestContext",
    "Route",
    "SessionKey",
    "StageRecord",
    "Usage",
    "UpstreamResult",
]


@dataclass(slots=True)
class RequestContext:
    """Everything one LLM request carries through the chain.

    Edge-set fields are never mutated after the edge hands over. ``view`` is
    the request as every stage reads it, whatever its wire format
    (:mod:`router.core.request_view`); ``wire`` is the adapter of that format,
    which alone reads ``body`` (the client's parsed body) and renders errors.
    ``client`` is the aiohttp request, used only by the terminal stage to
    stream the answer (None when the chain runs without a client, as in
    `pinch-router explain`).
    """

    request_id: str
    received_at: float  # wall clock, seconds since the epoch
    started: float  # perf_counter at arrival, for durations
    headers: CIMultiDictProxy[str]
    body: dict[str, Any]
    view: RequestView
    wire: WireAdapter
    client: web.Request | None
    session: SessionKey | None = None
    # session-fingerprint: the session's stored values every stage reads (classification, pinch
    # ledger, escalation), read in one round trip once the session is known; None: not read
    session_state: SessionSnapshot | None = None
    # classification-cache: the session's stored classification (source cached), for the classifier to use
    cached_classification: Classification | None = None
    # classifier: the one classification the request is routed on (classifier, override, cached or fallback)
    classification: Classification | None = None
    relevance: Relevance | None = None
    pinch: PinchStats | None = None
    # pinch's compressed tool results by position in view.conversation.tool_results(); None: none
    rewrites: Rewrites | None = None
    capabilities: Capabilities | None = None
    route: Route | None = None
    upstream: UpstreamResult | None = None
    response: web.StreamResponse | None = None
    # ``view.units`` + the tool schemas measured once; see measured_prompt
    prompt_size: PromptSize | None = None
    trace: list[StageRecord] = field(default_factory=list)
    # Seconds spent waiting on upstreams, so the proxy's own overhead can be told apart.
    upstream_wait: float = 0.0
    # The proxy's own time when the response head went out (set with the x-router headers).
    overhead_ms: float | None = None

    @property
    def requested_model(self) -> str | None:
        """The model the client named; None: route for me."""
        return self.view.model

    @property
    def stream(self) -> bool:
        return self.view.stream

    @property
    def turn_text(self) -> TurnText:
        return self.view.turn_text

    def measured_prompt(self, estimator: TokenEstimator) -> PromptSize:
        """The prompt as the client sent it (the view's units + tool schemas), measured once per request.

        pinch-relevance (to know whether pruning is needed), pinch-prune (to
        prune) and the gate (when pinch did not run) share this one count.
        """
        if self.prompt_size is None:
            self.prompt_size = estimator.measure(self.view.units, self.view.tools)
        return self.prompt_size

    def error_response(self, error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
        """``error`` as this client's wire format renders it (how every stage refuses)."""
        return self.wire.error_response(error, headers)


# The fields the edge provides before any stage runs (used by order validation).
EDGE_FIELDS = frozenset({"request_id", "received_at", "headers", "body", "view", "wire"})

CTX_KEY = web.RequestKey("pinch_router_ctx", RequestContext)
