"""The protocol-neutral view of one request: what every stage reads instead of a wire format. Pure.

A **wire adapter** (``router/wire/``, one module per client API) parses and
validates the client's body, builds a :class:`RequestView` of it at the edge,
and, once the chain has decided, writes the chain's changes
(:class:`BodyChanges`) back into the client's own body, so every byte the
proxy did not change goes out as the client sent it. Stages never read the
body or a format's messages for anything the view covers.

The view is cheap by construction: pinch and the token estimate run on every
request, so it keeps references to the client's own objects, and the parts
only pinch needs (tool results, turn starts, tool names) are computed on first
use by the format's :class:`Conversation`.

**Units.** The estimator counts a request as a list of *units* (dicts), each
with one per-unit overhead (:class:`router.core.tokens.TokenEstimator`). For
OpenAI chat a unit is a message. An adapter whose messages can hold several
tool results (an Anthropic user message with several ``tool_result`` blocks,
Responses' ``function_call_output`` items) makes each result its own unit, so
pinch can re-count a rewrite from its length change alone: **a unit holds at
most one tool result**, and a unit that holds one changes only by it.

**Tool results** are ``(unit index, stable id, content)``: the id names the
result across requests (the tool call id, else ``#<unit>``) for the pinch
ledger, and ``content`` is the result's content as sent — a string, or a list
of parts where text parts are ``{"type": "text" | "input_text", "text": str}``
and every other part is kept as it is. Pinch returns its rewrites by result
(position in :meth:`Conversation.tool_results` → new content of the same kind),
and the adapter puts each back where the result came from.

A result's unit is the dict that holds it, under the format's
``result_key`` (its content: ``content``, Responses' ``output``) and
``result_id_key`` (its call id). The pass that finds the results records only
their units (:meth:`Conversation.result_units`, a list of ints), and pinch
reads each candidate's content and id from its unit, so a request pays for
the results pinch considers, not a :class:`ToolResult` per result
(:class:`ResultsByUnit` builds those on first use, for the stages that want
them all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

import orjson

from router.core.frozen import frozen
from router.core.resent_prefix import KnownBody
from router.core.results import StaleSignatures
from router.core.retrieve import ToolOffer
from router.core.turn_text import TurnText

Unit = dict[str, Any]
Rewrites = Mapping[int, Any]  # tool-result position → its new content
NO_REWRITES: Rewrites = MappingProxyType({})
TOOL_NAME_MAX_CHARS = 64


class ToolResult(NamedTuple):
    """One tool result of the conversation (see the module doc)."""

    unit: int
    id: str
    content: Any


def units_with(units: list[Any], result_units: Sequence[int], rewrites: Rewrites, key: str) -> list[Any]:
    """``units`` with each rewritten result's ``key`` (``content``, ``output``) replaced; the very
    same list when none is. Every other unit is the same object; no unit is mutated.
    ``result_units``: :meth:`Conversation.result_units`."""
    if not rewrites:
        return units
    out = list(units)
    # runs on every pinched request, once per rewrite: the lookups stay in C
    for index, value in zip(map(result_units.__getitem__, rewrites), rewrites.values()):
        out[index] = {**units[index], key: value}
    return out


def start_of_last_turns(turn_starts: Sequence[int], count: int) -> int:
    """:meth:`Conversation.last_turns_start` from a conversation's :meth:`~Conversation.turn_starts`."""
    return turn_starts[-count] if len(turn_starts) >= count else 0


class Conversation(Protocol):
    """The conversation as pinch and relevance read it; one implementation per wire format.

    The last two methods are the format's own needs, asked in neutral terms, with defaults for a
    format that signs nothing (an implementation subclasses this protocol to inherit them).
    """

    __slots__ = ()

    @property
    def units(self) -> Sequence[Unit]:
        """What the estimator counts, in order (see the module doc)."""
        ...

    def turn_starts(self) -> Sequence[int]:
        """The unit index where each assistant turn starts, ascending."""
        ...

    def last_turns_start(self, count: int) -> int:
        """The unit index where the last ``count`` assistant turns start (``turn_starts()[-count]``);
        0 when there are fewer. Pinch asks it on every request it prunes: a format may find it
        without listing every turn (chat walks back from the end)."""
        ...

    def tool_results(self) -> Sequence[ToolResult]:
        """Every tool result, in order of appearance."""
        ...

    def result_units(self) -> Sequence[int]:
        """The unit of each tool result, in order of appearance (``tool_results()[p].unit``, without building them)."""
        ...

    @property
    def result_key(self) -> str:
        """The key of a result's unit that holds its content."""
        ...

    @property
    def result_id_key(self) -> str:
        """The key of a result's unit that holds its call id."""
        ...

    #: :meth:`tool_name` and :meth:`tool_call` of a unit read nothing after it: a later request whose
    #: conversation begins with the very same units names them alike (pinch keeps them: router.core.unit_memo)
    names_from_earlier_units: bool = False

    def tool_name(self, unit: int) -> str:
        """The tool that produced the result ``units[unit]`` holds: one clean line, for its placeholder.
        Asked by unit, not position: a unit holds at most one result, and pinch has the unit at hand."""
        ...

    def tool_call(self, unit: int) -> tuple[str, str]:
        """The call that produced the result ``units[unit]`` holds, as the model wrote it: its tool
        (:meth:`tool_name`) and its arguments as text — the format's own string when it sends one
        (chat, Responses), else the object as :func:`call_arguments` writes it; "" when unknown.
        First sight names an earlier call so in a pointer the model can follow."""
        return self.tool_name(unit), ""

    def batch_hold(self, checks_signatures: bool) -> str | None:
        """Why a batch that only the budget calls for should wait, for a model that does or does not
        check its reasoning's signatures (None: it need not wait). The window still forces a batch."""
        return None

    def stale_signatures(self, first_changed: int | None, remembered: tuple[str, ...]) -> tuple[StaleSignatures | None, tuple[str, ...]]:
        """The signed parts that go stale when the results from position ``first_changed`` on are
        rewritten (None: none is), plus those the session ``remembered`` as stale; and the session's
        record after this request."""
        return None, remembered


class PlacedConversation(Conversation):
    """A conversation whose tool results and turn starts were placed once, up front, by one pass
    over the format's messages (Anthropic Messages, Gemini): the accessors pinch reads, shared."""

    __slots__ = ("_results", "_units", "_turns")

    def __init__(self, results: list[ToolResult], turns: list[int]) -> None:
        self._results = results
        self._units = [result.unit for result in results]
        self._turns = turns

    def turn_starts(self) -> list[int]:
        return self._turns

    def last_turns_start(self, count: int) -> int:
        return start_of_last_turns(self._turns, count)

    def tool_results(self) -> list[ToolResult]:
        return self._results

    def result_units(self) -> list[int]:
        return self._units


def stale_signed(signed: Iterable[tuple[int, int, str]], changed_from: int | None, remembered: Iterable[str], max_kept: int) -> StaleSignatures:
    """The signed parts that are stale, for a format's :meth:`Conversation.stale_signatures`:
    ``signed`` lists each signed part as (message, part, key) in order, ``changed_from`` is the
    message from which on the bytes changed (None: none), ``remembered`` the keys the session
    recorded as stale. A part is stale when its key was recorded or its message comes after
    ``changed_from``; the record keeps the newest ``max_kept`` keys. Deterministic, so each later
    request names the very same parts."""
    record = list(dict.fromkeys(remembered))
    known = set(record)
    if changed_from is None and not known:
        return StaleSignatures()
    positions: list[tuple[int, int]] = []
    added: list[str] = []
    for m, b, key in signed:
        if key in known:
            positions.append((m, b))
        elif changed_from is not None and m > changed_from:
            positions.append((m, b))
            added.append(key)
            known.add(key)
    if not positions:
        return StaleSignatures(keys=tuple(record))
    return StaleSignatures(tuple(positions), tuple((record + added)[-max_kept:]), len(added))


def tool_results_of(conversation: Conversation) -> list[ToolResult]:
    """Every result of ``conversation`` as a :class:`ToolResult`, read from its unit."""
    units, key, id_key = conversation.units, conversation.result_key, conversation.result_id_key
    return [ToolResult(unit, stable_id(units[unit].get(id_key), unit), units[unit].get(key)) for unit in conversation.result_units()]


def nearest_assistant(messages: Sequence[Any], start: int, answers: dict[int, int]) -> int:
    """The index of the nearest message at or before ``start`` whose role is ``assistant`` (-1: none),
    for the views whose results answer the calls of the assistant message before them (chat, Anthropic
    Messages, Ollama). ``answers`` (one per conversation) remembers the answer for every message a walk
    passes, so naming all of a transcript's results walks it once in total, in any order — never a walk
    per result, which a body of thousands of results and no assistant message would make quadratic."""
    passed = []
    found = -1
    for index in range(start, -1, -1):
        known = answers.get(index)
        if known is not None:
            found = known
            break
        if messages[index].get("role") == "assistant":
            found = index
            break
        passed.append(index)
    for index in passed:
        answers[index] = found
    return found


def stable_id(call_id: Any, unit: int) -> str:
    """A result's id: its call id when that is a non-empty string, else ``#<unit>``."""
    return call_id if type(call_id) is str and call_id else f"#{unit}"


@frozen
class RequestTarget:
    """What a request's URL says beside its body, for a wire format whose body does not say it all:
    the path's named parts (Gemini names the model and the action there) and the query (its
    ``alt=sse``). Empty for the formats whose body carries everything."""

    path: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)


NO_TARGET = RequestTarget()


@frozen
class RequestView:
    """One request as the stages see it, whatever wire format it came in.

    ``tools`` are the tool schemas as sent: counted toward the prompt, never
    compressed. ``tools_present``: the request offers tools or its history
    holds tool calls or results (providers reject tool history for models
    without tool support). ``json_output``: the client asked for JSON output
    (OpenAI ``response_format`` json_object / json_schema). ``output_limit``:
    the output tokens the client asked for, None when it set no limit.
    ``usage_requested``: the client asked a stream for its usage report;
    when it did not, the proxy asks on its behalf and the relay drops the
    report again. ``opening``: what the session fingerprint hashes — role and text of the
    opening system part(s) and of the first user message, in that order.
    """

    wire: str
    model: str | None  # None: the client named no model (route for me)
    stream: bool
    conversation: Conversation
    tools: Any
    offers_tools: bool
    tools_present: bool
    has_images: bool
    json_output: bool
    output_limit: int | None
    turn_text: TurnText
    opening: tuple[str, ...]
    # The client asked for the stream's usage report (True for a format whose streams always report it).
    usage_requested: bool = True
    # A session id the body itself carries (Anthropic ``metadata.user_id``'s session part), used after headers.
    body_session: str | None = None
    # The client asked for extended thinking (Anthropic ``thinking``), for the gate and the record.
    thinking: bool = False
    # The leading units that are the very objects of the earlier body this one resumed
    # (router.core.resent_prefix): the estimator takes their sizes from that body's measurement.
    reused_units: int = 0

    @property
    def units(self) -> Sequence[Unit]:
        return self.conversation.units


@frozen
class BodyChanges:
    """Everything the chain changes in a request, for the adapter to write into the client's body.

    ``upstream_model``: the chosen candidate's model id. ``rewrites``: pinch's
    compressed tool results (:data:`Rewrites`). ``output_tokens``: the output
    limit to send (lowered only: a limit the client set above it is clamped,
    none is never added). ``request_usage``: ask a stream for its usage report
    though the client did not (the relay then drops it again). ``prompt_cache_key``:
    set when the client sent none (for a provider with ``set_prompt_cache_key``).
    ``translated``: the body is the source of a translation to the provider's other
    wire format, not what a provider of the client's format receives (what only such
    a provider must not see — the Anthropic thinking the proxy made — stays for the
    translation to carry). ``thinking_off``: how the chosen model takes thinking switched off
    for this request, when the request needs it (``models[].thinking_off``). ``stale``: the
    signed reasoning to leave out, its prefix changed by pinch, for a model that checks it
    (``models[].thinking_binding``; None: none). ``written``: the client's body as the edge kept it
    (:class:`router.core.resent_prefix.KnownBody`), whose elements that go out unchanged are written
    as the bytes the client sent (:func:`written_body`); None: everything is serialised. ``tool``: a
    function tool the proxy declares after the client's own (each format writes it its way).
    """

    upstream_model: str
    rewrites: Rewrites = field(default_factory=dict)
    output_tokens: int | None = None
    request_usage: bool = False
    prompt_cache_key: str | None = None
    translated: bool = False
    thinking_off: str = "omit"
    stale: StaleSignatures | None = None
    written: KnownBody | None = None
    # A tool the proxy declares after the client's (pinch_retrieve, router.core.retrieve); None: none.
    tool: ToolOffer | None = None


def rewritten_array(
    changes: BodyChanges, elements: list[Any], element_of: Callable[[int], int], write: Callable[[Rewrites], list[Any]]
) -> list[Any]:
    """``write(changes.rewrites)``: a wire's write-back of pinch's rewrites into ``elements`` (the body's
    array; every element it does not rewrite left as it is), through the kept body
    (:meth:`~router.core.resent_prefix.KnownBody.rewritten`): the elements the turn before made with
    the same rewrites, up to the first whose rewrites differ, are taken again, and then their bytes.
    ``element_of(position)``: the index in ``elements`` of result ``position``'s element."""
    rewrites, known = changes.rewrites, changes.written
    if not rewrites or known is None:
        return write(rewrites)
    return known.rewritten(elements, rewrites, element_of, write)


def written_body(payload: dict[str, Any], key: str, changes: BodyChanges) -> bytes:
    """``orjson.dumps(payload)``, byte for byte, the elements of its ``key`` array that are the client's
    own written as the client wrote them (``changes.written``): only what the chain changed is serialised."""
    known = changes.written
    if known is None or known.key != key or type(payload.get(key)) is not list:
        return orjson.dumps(payload)
    return orjson.dumps({**payload, key: known.written(payload[key])})


def call_arguments(arguments: Any) -> str:
    """A tool call's arguments as text, one fixed way: a string as the model wrote it; an object (Anthropic's
    ``input``, Gemini's ``args``) as compact JSON with sorted keys, so the same call reads the same on every
    request; "" when there are none."""
    if type(arguments) is str:
        return arguments
    if arguments is None:
        return ""
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except orjson.JSONEncodeError:  # an integer past 64 bits, a nesting too deep: the tool alone names the call
        return ""


def clean_tool_name(name: Any, fallback: Any = None) -> str:
    """A tool name fit for a placeholder: one line, at most 64 characters; ``fallback`` (e.g. the
    result's own ``name``) when ``name`` is blank or not a string, ``tool`` when neither is usable."""
    if type(name) is str and name.isidentifier() and len(name) <= TOOL_NAME_MAX_CHARS:
        return name  # the usual case: already one clean word
    if not isinstance(name, str) or not name.strip():
        name = fallback
    if not isinstance(name, str):
        name = ""
    # one line, bounded: the placeholder must stay short and recognisable
    return " ".join(name.split())[:TOOL_NAME_MAX_CHARS] or "tool"
