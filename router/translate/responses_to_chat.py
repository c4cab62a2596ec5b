"""A Responses API request translated to a chat-completions request. Pure.

For a provider that speaks chat completions (OpenAI-compatible servers,
Ollama). The input comes already validated (:mod:`router.wire.openai_responses.validation`)
and with the chain's changes written in (pinched outputs, clamped limit).

Conversation, in order:

* ``instructions`` → a leading ``system`` message; ``developer`` and ``system``
  messages → ``system`` (chat servers other than OpenAI's know no ``developer``);
* ``input_text`` / ``output_text`` parts → text, ``input_image`` → ``image_url``
  (a user message keeps its parts as a list; system and assistant text is
  joined into a string, the form every chat server accepts);
* ``function_call`` items → ``tool_calls`` of one assistant message (joined to the
  assistant text just before them), ``function_call_output`` → a ``tool``
  message; an output is kept only when it answers a call not answered yet
  (chat servers reject a second answer to one call, or one to no call) — ids
  are matched per call, as some servers reuse them from turn to turn;
* ``reasoning`` items are never sent: a chat server cannot take them back, and
  their ``encrypted_content`` only means something to the provider that made it.
  Other item types a chat request cannot express are dropped and reported;
* a ``compaction_trigger`` (Codex on OpenAI's provider compacting its session) → a user message
  asking for a summary, tools ruled out, and a ``compaction`` item the proxy made → a user message
  holding that summary (:mod:`router.translate.compaction`).

Fields: function tools are kept, and so are ``custom`` (freeform) tools, as a function of one
string argument ``input`` — Codex on its default model offers its shell only as the custom tool
``exec`` (JavaScript that calls ``tools.exec_command``), inside an ``additional_tools`` input item,
in the ``functions`` namespace: those tools are read from there too, the namespace ``functions``
opened (its tools are called by their own names). A ``custom_tool_call`` item goes to chat as a
call with arguments ``{"input": …}``, its ``custom_tool_call_output`` as the tool message, and a
chat call of a custom tool comes back as a ``custom_tool_call`` item
(:func:`router.translate.chat_to_responses.custom_tool_names`). Other tool types (``namespace``s
but ``functions``, ``web_search``, …, which the client cannot run through a chat model) are
dropped and reported in :attr:`ChatTranslation.dropped`; ``tool_choice``,
``parallel_tool_calls`` (only with tools left), ``text.format`` →
``response_format``, ``max_output_tokens`` → ``max_tokens``, ``reasoning.effort``
→ ``reasoning_effort``, and ``temperature``, ``top_p``, ``user``,
``prompt_cache_key`` as they are. A stream asks for its usage chunk, which the
Responses answer reports in ``response.completed``. Responses-only fields
(``store``, ``include``, ``client_metadata``, ``truncation``, …) stay behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

import orjson

from router.core.results import Candidate, Usage
from router.core.retrieve import TOOL_NAME as RETRIEVE_TOOL_NAME
from router.core.sse import SseRelay
from router.translate import compaction
from router.wire.openai_responses.compaction import ITEM as COMPACTION, asks_compaction
from router.translate.chat_to_responses import (
    ChatStreamTranslator,
    ResponseFrame,
    chat_chunks,
    completion_to_response,
    custom_tool_names,
)
from router.translate.chat_shape import strict_chat_messages
from router.translate.element_memo import ElementMemo, PassMemo
from router.translate.json_values import checked_answer, checked_event, request_object
from router.translate.protocol import EVENT_STREAM, AnswerIds, MalformedAnswer, ToChat
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.openai_chat.validation import answer_problem as chat_answer_problem
from router.wire.openai_chat.validation import chunk_problem as chat_chunk_problem
from router.wire.openai_responses.stream import sse_event
from router.wire.openai_responses.validation import (
    TEXT_PARTS,
    Item,
    input_items,
    item_type,
    validate_responses_body,
)

CARRIED_FIELDS = ("temperature", "top_p", "user", "prompt_cache_key")


@dataclass(frozen=True, slots=True)
class ChatTranslation:
    """The chat body, what of the request it could not carry (``"tool namespace:multi_agent_v1"``, …),
    and the custom tools the request offers (:func:`~router.translate.chat_to_responses.custom_tool_names`)."""

    body: dict[str, Any]
    dropped: tuple[str, ...]
    custom_tools: frozenset[str] = frozenset()


def responses_to_chat(body: dict[str, Any], items: tuple[Item, ...] | list[Item]) -> ChatTranslation:
    """``body`` (a valid Responses body) as a chat body; ``items`` its input as items."""
    dropped: list[str] = []
    additional: list[Any] = []
    messages = _messages(body.get("instructions"), items, dropped, additional)
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    offered = offered_tools(body, additional)
    tools = _function_tools(offered, dropped)
    if tools:
        chat["tools"] = tools
        if asks_compaction(items):  # the summary is text: the tools stay declared for the calls in the history
            chat["tool_choice"] = "none"
        elif "tool_choice" in body:
            choice = _tool_choice(body["tool_choice"])
            if choice is not None:
                chat["tool_choice"] = choice
        if isinstance(body.get("parallel_tool_calls"), bool):
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    response_format = _response_format(body.get("text"))
    if response_format is not None:
        chat["response_format"] = response_format
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        chat["reasoning_effort"] = reasoning["effort"]
    for key in CARRIED_FIELDS:
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("stream") is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return ChatTranslation(chat, tuple(dropped), custom_tool_names(offered))


def _messages(instructions: Any, items: tuple[Item, ...] | list[Item], dropped: list[str], additional: list[Any]) -> list[dict[str, Any]]:
    """The chat messages; what the items hold besides (drop notes, the tools of ``additional_tools``
    items) added to ``dropped`` and ``additional``, in order."""
    made = _items_pass(items)
    # the messages picked in C (nearly every entry is one): a Python step per entry cost as much as the resumed pass
    messages = list(compress(made, map(isinstance, made, repeat(dict))))
    if len(messages) < len(made):
        for entry in made:
            if type(entry) is str:
                dropped.append(entry)
            elif type(entry) is list:
                additional += entry
    if isinstance(instructions, str) and instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    if asks_compaction(items):  # the trigger, last, asks for the summary (the pass read it as one not last: dropped)
        messages.append({"role": "user", "content": compaction.PROMPT})
        dropped.pop()
    return messages


# What the pass made of a conversation's items, taken again for the items the next request repeats
# (router.translate.element_memo), and the shape it is then given (router.translate.chat_shape)
ITEMS: PassMemo[dict[str, Any] | str | list[Any]] = PassMemo()
STRICT: PassMemo[dict[str, Any]] = PassMemo()


def _items_pass(items: tuple[Item, ...] | list[Item]) -> list[dict[str, Any] | str | list[Any]]:
    """The items as chat messages and, in their place, what was dropped (a note, a str) and the tools an
    ``additional_tools`` item holds (its list). What was made of
    the items a conversation repeats (the very objects) is taken again up to the last of them before
    which no call is open (:data:`ITEMS`): there the pass is as at the start and the output before is
    final. A compaction trigger is read as one not last (dropped; see :func:`_messages`), so that no
    item's output depends on the items after it."""
    start, out, marks = ITEMS.resume(items, None)
    unanswered: set[str] = set()  # ids of the calls made so far that no output answered yet
    # the assistant message function calls may still join (the last message made; a note of an item
    # dropped since may follow it in ``out``), None when a call starts a new one
    joining: dict[str, Any] | None = None
    for at in range(start, len(items)):
        item = items[at]
        if not unanswered and joining is None:
            marks.append((at, len(out)))
        kind = item_type(item)
        if kind == "message":
            message = _message(item)
            out.append(message)
            joining = message if message["role"] == "assistant" else None
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item["arguments"] if kind == "function_call" else orjson.dumps({"input": str(item.get("input", ""))}).decode()
            call = {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": arguments}}
            if joining is None:
                joining = {"role": "assistant", "content": None}
                out.append(joining)
            joining.setdefault("tool_calls", []).append(call)
            unanswered.add(item["call_id"])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            joining = None
            # a call answered already (or never made): a chat server would reject the second answer.
            # Ids are matched per call, not per conversation: some servers reuse ids across turns.
            if item["call_id"] not in unanswered:
                out.append(f"item function_call_output:{item['call_id']} (no unanswered call with that id)")
                continue
            unanswered.discard(item["call_id"])
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(output if isinstance(output, (str, list)) else "")})
        elif kind == COMPACTION and (summary := compaction.summary_message(item)) is not None:
            joining = None
            out.append(summary)
        elif kind == "additional_tools":  # the tools it holds (Codex's, on its default model), offered with the request's
            if isinstance(item.get("tools"), list):
                out.append(item["tools"])
        elif kind != "reasoning":
            out.append(f"item {kind}")
    ITEMS.keep(items, None, out, marks)
    return out


def _message(item: Item) -> dict[str, Any]:
    role = "system" if item["role"] in ("developer", "system") else item["role"]
    content = item["content"]
    if isinstance(content, str) or role != "user":
        return {"role": role, "content": _text(content)}
    parts: list[dict[str, Any]] = []
    for part in content:
        if part["type"] in TEXT_PARTS:
            parts.append({"type": "text", "text": part["text"]})
        elif part["type"] == "input_image" and isinstance(part.get("image_url"), str):
            image = {"url": part["image_url"]}
            if isinstance(part.get("detail"), str):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
    if all(p["type"] == "text" for p in parts):
        return {"role": "user", "content": "\n\n".join(p["text"] for p in parts)}
    return {"role": "user", "content": parts}


def _text(content: str | list[Any]) -> str:
    """A string, or the text of the parts (output_text, input_text, refusal) joined."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, dict):
            text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
            if isinstance(text, str):
                texts.append(text)
    return "\n\n".join(texts)


def offered_tools(body: dict[str, Any], additional: list[Any]) -> list[dict[str, Any]]:
    """The request's tools: ``tools``, then ``additional``, the tools of its ``additional_tools`` items
    (Codex's, on its default model); the proxy's ``pinch_retrieve``, declared last in ``tools``
    (router.core.retrieve), after them all."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    proxys = [tools.pop()] if tools and tools[-1].get("type") == "function" and tools[-1].get("name") == RETRIEVE_TOOL_NAME else []
    tools += [t for t in additional if isinstance(t, dict)]
    return tools + proxys


CUSTOM_INPUT = "input"  # the one argument a custom (freeform) tool is given as a chat function


def _function_tools(tools: list[dict[str, Any]], dropped: list[str]) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    # a resent body's tools are the very objects of the body before (resent_prefix): made once, taken again
    for made, lost in TOOLS.map(tools, _function_tool):
        kept += made
        dropped += lost
    return kept


TOOLS: ElementMemo[tuple[list[dict[str, Any]], list[str]]] = ElementMemo()


def _function_tool(tool: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """A Responses tool as chat function tools (those of the ``functions`` namespace, one for a function or
    a custom tool), and what of it was dropped."""
    kind, name = tool.get("type"), tool.get("name")
    if kind == "namespace" and name == "functions" and isinstance(tool.get("tools"), list):
        kept: list[dict[str, Any]] = []
        dropped: list[str] = []
        for inner in tool["tools"]:
            if isinstance(inner, dict):
                made, lost = _function_tool(inner)
                kept += made
                dropped += lost
        return kept, dropped
    if kind == "custom" and isinstance(name, str):
        said = tool.get("format") if isinstance(tool.get("format"), dict) else {}
        described = "the tool's input, as raw text" + (f" ({said.get('syntax')} grammar)" if said.get("type") == "grammar" else "")
        parameters = {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string", "description": described}}, "required": [CUSTOM_INPUT]}
        function = {"name": name, "parameters": parameters, **({"description": tool["description"]} if isinstance(tool.get("description"), str) else {})}
        return [{"type": "function", "function": function}], []
    if kind != "function":
        return [], [f"tool {kind}" + (f":{name}" if isinstance(name, str) else "")]
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if tool.get(key) is not None}
    return [{"type": "function", "function": function}], []


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    return None  # hosted-tool or allowed-tools choices: the chat server picks (auto)


def _response_format(text: Any) -> dict[str, Any] | None:
    format_ = text.get("format") if isinstance(text, dict) else None
    if not isinstance(format_, dict) or format_.get("type") == "text":
        return None
    if format_.get("type") == "json_schema":
        schema = {key: format_[key] for key in ("name", "schema", "strict", "description") if key in format_}
        return {"type": "json_schema", "json_schema": schema}
    return {"type": format_["type"]}


class ResponsesToChat(ToChat):
    """Translator from a Responses request to a chat-completions provider, and its answer back.

    One per request: :meth:`request` reads the Responses body the adapter
    wrote (chain's changes included) and keeps it, for the answer to echo.
    """

    def __init__(self, ids: AnswerIds, system_anywhere: bool = False) -> None:
        self.ids = ids
        self.system_anywhere = system_anywhere  # the provider takes system messages anywhere (else: one, leading)
        self.frame = ResponseFrame(f"resp_{self.ids.token}", self.ids.created, {})
        self.dropped: tuple[str, ...] = ()

    def chat_request(self, body: bytes | dict[str, Any], candidate: Candidate) -> dict[str, Any]:
        """The chat body, before it is written (a chained translation hands it on as it is)."""
        responses = request_object(body)
        # valid: the edge checked it, the chain kept it so; a bytes body (a chained translation's) is read again
        items = input_items(responses.get("input")) if isinstance(body, dict) else validate_responses_body(responses).items
        translation = responses_to_chat(responses, items)
        self.frame = ResponseFrame(f"resp_{self.ids.token}", self.ids.created, responses, translation.custom_tools, asks_compaction(items))
        self.dropped = translation.dropped
        chat = translation.body
        chat["messages"] = strict_chat_messages(chat["messages"], system_anywhere=self.system_anywhere, memo=STRICT)
        return chat

    def response_object(self, body: bytes | Any) -> dict[str, Any]:
        """A whole chat completion as a Responses ``response``; :class:`MalformedAnswer` for what is none."""
        completion = checked_answer(body, chat_answer_problem, "a chat completion")
        response = completion_to_response(completion, self.frame)
        if response is None:
            raise MalformedAnswer("not a chat completion: no choices[0].message")
        return response

    def streams(self, content_type: str) -> bool:
        return content_type == EVENT_STREAM

    def stream(self) -> ChatStreamAsResponses:
        return ChatStreamAsResponses(self.frame)


class ChatStreamAsResponses:
    """One chat SSE stream in (raw bytes), Responses events out, whole events only.

    An upstream error inside the stream ends it with ``response.failed``; the
    end of the chat stream (``[DONE]`` or the connection closing after it)
    completes the response, with the usage the stream reported.
    """

    def __init__(self, frame: ResponseFrame) -> None:
        self.chat = SseRelay(OPENAI_CHAT_ADAPTER)
        self.translator = ChatStreamTranslator(frame)
        self.started = False

    @property
    def usage(self) -> Usage | None:
        return self.chat.usage

    def feed(self, chunk: bytes) -> bytes:
        events = [] if self.started else self.translator.start()
        self.started = True
        for parsed in chat_chunks(self.chat.feed(chunk)):
            events += self.translator.feed(checked_event(parsed, chat_chunk_problem, "a chat completion chunk") if isinstance(parsed, dict) else parsed)
        if self.chat.done:
            events += self.translator.finish()
        return b"".join(sse_event(e) for e in events)

    def finish(self) -> bytes:
        """At the end of the upstream stream: complete the response if [DONE] did not already —
        or fail it, when the stream closed before saying how the answer finished."""
        if not self.started:
            return b""
        if self.chat.done or self.translator.finish_reason is not None:
            events = self.translator.finish()
        else:
            events = self.translator.fail("the provider closed the stream before its end", "upstream_stream_interrupted")
        return b"".join(sse_event(e) for e in events)
