"""How a Messages body's messages lie as the view's units, found once (by the fused check, or the view). Pure.

Units: the ``system`` (one unit), then each message — except that a user message's
``tool_result`` blocks are each a unit of their own (the block itself) and its other blocks one
more unit (:mod:`.view`). :func:`add_message` places one message; the fused check
(:func:`~router.wire.anthropic_messages.validation.check_messages_body`) calls it on its one
pass over the messages, :class:`~router.wire.anthropic_messages.view.MessagesConversation`
through :func:`layout_of` when no check ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from router.core.request_view import ToolResult, Unit
from router.wire.anthropic_messages.blocks import blocks_of


@dataclass(slots=True)
class MessagesLayout:
    """The units, the tool results (and each one's ``(message, block)`` place), the turn starts."""

    units: list[Unit] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    where: list[tuple[int, int]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)


def is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str)


def add_message(layout: MessagesLayout, index: int, message: Any, has_result: bool | None = None) -> None:
    """Place ``messages[index]``; ``has_result``: whether it is a user message holding a tool result,
    when the caller knows (else looked up)."""
    content = message.get("content")
    role = message.get("role")
    units = layout.units
    if role == "assistant":
        layout.turns.append(len(units))
    if has_result is None:
        has_result = role == "user" and isinstance(content, list) and any(is_result(b) for b in content)
    if not has_result:
        units.append(message)
        return
    others = []
    for b, block in enumerate(content):
        if is_result(block):
            layout.results.append(ToolResult(len(units), block["tool_use_id"], block.get("content")))
            layout.where.append((index, b))
            units.append(block)
        else:
            others.append(block)
    if others:
        units.append({"role": role, "content": others})


def start(system: Any) -> MessagesLayout:
    """An empty layout, the system its first unit when there is one."""
    layout = MessagesLayout()
    if system:
        layout.units.append({"role": "system", "content": system})
    return layout


def layout_of(system: Any, messages: list[Any]) -> MessagesLayout:
    layout = start(system)
    for index, message in enumerate(messages):
        add_message(layout, index, message)
    return layout


def has_image(content: Any) -> bool:
    """A message's content holds an image, also inside a tool result."""
    for block in blocks_of(content):
        kind = block.get("type")
        if kind == "image" or (kind == "tool_result" and has_image(block.get("content"))):
            return True
    return False
