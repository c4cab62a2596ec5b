"""RequestContext: the typed record one request carries through the chain (ARCHITECTURE §3). The edge
fills the request fields once; each stage writes its own slots (its ``provides``) with frozen results,
``ctx[SLOT] = result``, under a :class:`~router.core.results.Slot` declared in its own module (or, for a
result the edges read too, beside its type in :mod:`router.core.results`). A stage reads the view only;
the wire adapter alone reads the body."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from router.core.errors import JSON, ApiError

if TYPE_CHECKING:
    from multidict import CIMultiDictProxy

    from router.core.request_view import RequestView
    from router.core.resent_prefix import KnownBody
    from router.core.results import Slot, StageRecord
    from router.core.tokens import PromptSize, TokenEstimator
    from router.wire import WireAdapter

# Lets the edge and the decision log read which error a response carried without parsing it.
ERROR_CODE_KEY = web.ResponseKey("pinch_router_error_code", str)
T = TypeVar("T")


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
    response: web.StreamResponse | None = None
    prompt_size: PromptSize | None = None  # see measured_prompt
    known_body: KnownBody | None = None  # the edge: the body kept for the next turn (router.core.resent_prefix)
    trace: list[StageRecord] = field(default_factory=list)
    upstream_wait: float = 0.0  # seconds spent waiting on upstreams, told apart from the proxy's own time
    overhead_ms: float | None = None  # the proxy's own time when the response head went out
    slots: dict[Slot[Any], Any] = field(default_factory=dict)  # the stages' results written so far (ctx[SLOT])

    def __getitem__(self, slot: Slot[T]) -> T | None:
        return self.slots.get(slot)

    def __setitem__(self, slot: Slot[T], value: T | None) -> None:
        self.slots[slot] = value

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
