"""``pinch_retrieve``: the one tool the proxy offers the model, and answers itself. Pure.

First sight's lossy cut (:mod:`router.core.first_sight.long_output`) sends a long tool output as its
head, tail, error lines and the lines naming the task, and says so in its first line:
``pinch_retrieve("<id>") returns the whole output``. The model may call the tool; the proxy answers the
call without the client ever seeing it (:mod:`router.clients.retrieve`) and continues the upstream
call with the whole output.

**Where the originals are.** An agent resends its whole history on every request, the original of
every tool result included (pinch changes only what goes upstream). So the original a call asks for
is in the very request being answered: no store to keep, bound, share across replicas or expire, and
nothing of it ever written to disk. A result the client no longer sends (it compacted its history)
cannot be retrieved, and its cut text is gone from the conversation with it.

**Offered for the whole session.** The tool is declared with the client's own tools, which every
provider caches before the conversation: adding it only once a cut result appears would change the
cached prefix at that moment. So a request is offered it whenever lossy first sight is on and the
client offers tools of its own (so the model can call tools): the same on every request of a
session (the declaration costs ~60 tokens, cached after the first request).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from router.core.frozen import frozen
from router.core.sse import SseEvents
from router.core.tokens import tokens_of_chars

TOOL_NAME = "pinch_retrieve"
# Short: the declaration goes with every request of a session (the cut output's own first line says the rest).
DESCRIPTION = "Returns the whole output of an earlier tool call that pinch-router cut, by the id its first line names."
PARAMETERS: dict[str, Any] = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
# An answer longer than this is cut (a 40k-line log must not blow the window a retrieve was meant to spare).
MAX_ANSWER_CHARS = 200_000
MAX_ID_CHARS = 512


@frozen
class ToolOffer:
    """A function tool the proxy adds to a request: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


RETRIEVE_TOOL = ToolOffer(TOOL_NAME, DESCRIPTION, PARAMETERS)


@frozen
class RetrieveCall:
    """One call of the tool by the model: its call id (the provider's) and its arguments as written
    (a JSON text, or an object: a provider's own form)."""

    call_id: str
    arguments: Any


def requested_id(arguments: Any) -> str | None:
    """The result id a call's ``arguments`` ask for, or None when they name none (any shape, any value:
    a model's arguments are untrusted)."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    value = arguments.get("id")
    if isinstance(value, str):
        value = value.strip().strip('"')  # a model may quote it as the marker shows it
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        return None
    return value


def answer_call(arguments: Any, original: Callable[[str], str | None]) -> tuple[str, bool]:
    """The text a call is answered with, and whether it found the output: the original text of the
    result ``original(id)`` finds, or a short note saying why there is none. Never raises."""
    wanted = requested_id(arguments)
    if wanted is None:
        return 'pinch_retrieve needs {"id": "<id>"}: the id named in a shortened output\'s first line.', False
    text = original(wanted)
    if text is None:
        return f"pinch_retrieve: no shortened output has the id {wanted[:80]!r} in this conversation.", False
    if len(text) > MAX_ANSWER_CHARS:
        cut = len(text) - MAX_ANSWER_CHARS
        return text[:MAX_ANSWER_CHARS] + f"\n[pinch-router: the last {cut} characters are not shown]", True
    return text, True


def declaration_tokens(tools_chars: int) -> int:
    """The tokens the tool's declaration adds to a request whose own tools' JSON measures ``tools_chars``
    characters (:func:`router.core.tokens.tools_chars`, which the prompt's measure counted already:
    :attr:`~router.core.tokens.PromptSize.tools_chars`), counted as the estimator counts tool schemas
    (:func:`router.core.tokens.tools_tokens` of the tools with it, less theirs), in chat's form (the
    other formats' forms differ by a few characters). The declaration joins the tools' compact JSON
    array with a comma, or makes an array of its own (two brackets)."""
    joined = tools_chars + 1 + _DECLARED_CHARS if tools_chars else 2 + _DECLARED_CHARS
    return tokens_of_chars(joined) - tokens_of_chars(tools_chars)


_DECLARED_CHARS = len(orjson.dumps({"type": "function", "function": {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": PARAMETERS}}))


class RetrieveRounds:
    """The skeleton of a streamed answer's rounds in a format of SSE events that are JSON objects
    (:class:`router.wire.retrieve.RetrieveStream`): each object goes to ``_event``, which says what
    goes on; ``next_round`` carries over what the client was sent (``_carry_over``), then starts afresh
    (``_reset``) with ``continuing`` set."""

    def __init__(self) -> None:
        self.events = SseEvents()
        self.continuing = False  # this is a round after the first
        self._reset()

    def _reset(self) -> None:
        raise NotImplementedError

    def _carry_over(self) -> None:
        """What a round sent the client, kept before the next one starts (nothing, by default)."""

    def _event(self, raw: bytes, event: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def next_round(self) -> None:
        self._carry_over()
        self.continuing = True
        self._reset()

    def feed(self, chunk: bytes) -> bytes:
        return self.events.feed_objects(chunk, self._event)
