"""A wire format's place in the HTTP API, declared as data the edge, the app and the tools loop over. Pure.

* :class:`ClientApi` (``WireAdapter.api``): how the proxy names the format's API and knows a request
  for it before reading a body — by the path, by a header its clients send, by how its clients ask
  for the model list — for all the edge answers itself (auth, framing errors, unknown paths, the
  endpoints outside the chain), and how a saved body of the format is known (``pinch-router explain``).
* The endpoints it serves outside the chain (``WireAdapter.endpoints``), each of a kind the HTTP edge
  serves with the format's pure functions: :class:`CountTokens` (a request's input tokens, never
  forwarded), :class:`ModelList`, :class:`ModelLookup` and :class:`ModelLookupByBody` (the catalogue
  and the aliases, as :class:`ListedModel`, in the format's shape; one model named in the path or in
  a POST body), :class:`FixedAnswer` (what does not depend on the request: a version) and
  :class:`Refused` (an operation of the format's API the proxy does not do, in its error shape).
* :func:`match_route`: an aiohttp route pattern matched without aiohttp (the path a saved request
  was sent to, for ``explain``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from router.core.tokens import TokenEstimator

Headers = Mapping[str, str]


def _nobody(headers: Headers, query: Headers) -> bool:
    return False


def _no_body(body: Any, headers: Headers) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class ClientApi:
    """What the proxy knows of a format's API before it reads a body."""

    label: str  # the `api` label of an unknown path counted as this API's (pinch_router_unknown_path_requests_total)
    title: str  # its name in what the proxy tells a client, after "the": "Anthropic Messages API"
    # Where a path names the API, at any depth (``/v1/v1/messages``): every error the edge answers on
    # such a path is the format's, whatever the headers; of several formats, the one named leftmost.
    names: re.Pattern[str]
    base_url: str  # where its clients' base URL points, as a client asking elsewhere is told
    listed: tuple[str, ...]  # its endpoints as the proxy lists them ("POST /v1/messages"): the root, a 404
    saved_path: str  # the path a saved body of the format is taken as sent to when none is given (explain)
    # A header every client of the format sends: on a path that names no API, the errors are the format's.
    client_header: str | None = None
    # A request from one of its clients (headers, query), whom the proxy's own model list (GET /v1/models,
    # /v1/models/{model}) answers in the format's shape: its ModelList and ModelLookup.
    model_client: Callable[[Headers, Headers], bool] = _nobody
    # Whether a body read from a file, with the headers given, is the format's (explain); the proxy's
    # own format is the one a body no other format claims is taken for.
    saved_body: Callable[[Any, Headers], bool] = _no_body
    any_depth: bool = False  # a listed path asked at another depth (a base URL off by a /v1) is told where it is served
    misdirected_status: int = 404  # the status of that answer to one of its clients
    own_root: bool = False  # every path it names is its own: an unknown one is told what the format serves
    # The vendor's APIs the proxy does not serve, (path, label, title): a client asking for one is told so.
    not_served: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ListedModel:
    """A name a client may ask for, as a model list shows it: a catalogue model, or a routing alias."""

    name: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    description: str = ""
    # What a request to it may ask for ("tools", "vision", "json_mode": the catalogue's `supports`; an
    # alias has what any model of the catalogue has, since the gate picks one that can)
    capabilities: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CountTokens:
    """``POST path``: a request's input tokens by the proxy's one estimator, answered by the proxy.

    ``count(body, estimator)``: (the tokens, the format's answer), or
    :class:`~router.core.errors.InvalidRequest` for a body it refuses (a 400 in the format's shape).
    ``label``: the endpoint's label in ``pinch_router_endpoint_requests_total`` and its log line's name.
    """

    method: ClassVar[str] = "POST"
    path: str
    label: str
    count: Callable[[dict[str, Any], TokenEstimator], tuple[int, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ModelList:
    """``GET path``: every :class:`ListedModel` in the format's list shape (``answer``)."""

    method: ClassVar[str] = "GET"
    path: str
    answer: Callable[[Sequence[ListedModel]], Any]


@dataclass(frozen=True, slots=True)
class ModelLookup:
    """``GET path`` (its ``{model}`` part names one): that model in the format's shape (``answer``); an
    unknown name is a 404 in the format's error shape."""

    method: ClassVar[str] = "GET"
    path: str
    answer: Callable[[ListedModel], Any]


@dataclass(frozen=True, slots=True)
class ModelLookupByBody:
    """``POST path`` whose JSON body names one model (the first of ``fields`` it holds as a string): that
    model in the format's shape (``answer``); a body naming none is a 400, an unknown name a 404, each in
    the format's error shape."""

    method: ClassVar[str] = "POST"
    path: str
    answer: Callable[[ListedModel], Any]
    fields: tuple[str, ...] = ("model",)


@dataclass(frozen=True, slots=True)
class FixedAnswer:
    """``GET path``: always ``answer`` (a JSON value), whatever the request (an API's version)."""

    method: ClassVar[str] = "GET"
    path: str
    answer: Any


@dataclass(frozen=True, slots=True)
class Refused:
    """``method path``: an operation of the format's API that the proxy does not do (managing models), always
    refused with ``status`` and ``message`` (``code`` in the decision log's and the proxy's terms), in the
    format's error shape, so its clients say why instead of "not found"."""

    method: str
    path: str
    status: int
    message: str
    code: str = "not_supported"


Endpoint = CountTokens | ModelList | ModelLookup | ModelLookupByBody | FixedAnswer | Refused

# A part of an aiohttp route pattern: {name} (one segment) or {name:regex}.
_PART = re.compile(r"\{(\w+)(?::((?:[^{}]|\{[^{}]*\})*))?\}")


def route_regex(pattern: str) -> re.Pattern[str]:
    """An aiohttp route pattern as a regex with a group for each named part."""
    out, at = [], 0
    for part in _PART.finditer(pattern):
        out += [re.escape(pattern[at : part.start()]), f"(?P<{part.group(1)}>{part.group(2) or '[^{}/]+'})"]
        at = part.end()
    return re.compile("".join([*out, re.escape(pattern[at:])]))


def match_route(pattern: str, path: str) -> dict[str, str] | None:
    """The named parts of ``path`` if it matches the aiohttp route ``pattern`` whole, else None."""
    found = route_regex(pattern).fullmatch(path)
    return found.groupdict() if found is not None else None
