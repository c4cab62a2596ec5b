"""The body an Anthropic-format provider is sent: the client's, with the chain's changes and no more. Pure.

Besides ``model``, pinched results and a clamped ``max_tokens`` (the adapter's), what only this
wire needs: the thinking blocks the proxy made are left out (Anthropic refuses what it did not
sign); thinking is switched off for one request mid a tool loop without Anthropic's thinking, in
the form the model takes (``models[].thinking_off``); a thinking budget follows a lowered
``max_tokens`` down; and the signed blocks whose prefix pinch changed are left out
(:mod:`router.wire.anthropic_messages.thinking`).
"""

from __future__ import annotations

from typing import Any

from router.wire.anthropic_messages.blocks import is_proxy_thinking


def without_proxy_thinking(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body for an Anthropic-format provider, without the thinking blocks the proxy made; None
    when it has none (the body goes out as it is).

    Such a block came from an OpenAI-chat model's ``reasoning_content`` earlier in the session;
    Anthropic rejects a thinking block it did not sign, so it is left out (a chat model that
    needs its reasoning back still gets it: translations read the body before this). Real signed
    blocks, redacted thinking and every other block stay as they are; an assistant message left
    with nothing is left out (:func:`without_blocks`). Whether thinking must then go off is
    :func:`tool_loop_without_thinking`'s question, asked of the client's body.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    made = frozenset(
        (m, b)
        for m, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for b, block in enumerate(message["content"])
        if is_proxy_thinking(block)
    )
    return {**body, "messages": without_blocks(messages, made)} if made else None


def without_blocks(messages: list[Any], positions: frozenset[tuple[int, int]]) -> list[Any]:
    """``messages`` without the blocks at ``positions`` (message index, block index); an assistant
    message left with nothing is left out (Anthropic joins the user turns around it). Every other
    message is the very same object."""
    out: list[Any] = []
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or not any((m, b) in positions for b in range(len(content))):
            out.append(message)
            continue
        kept = [block for b, block in enumerate(content) if (m, b) not in positions]
        if kept or message.get("role") != "assistant":
            out.append({**message, "content": kept})
    return out


MIN_THINKING_BUDGET = 1024  # Anthropic's floor for ``thinking.budget_tokens``


def with_thinking_off(body: dict[str, Any], form: str = "omit") -> dict[str, Any]:
    """The body with thinking switched off for this one request, in the model's ``form``
    (``models[].thinking_off``): ``omit`` leaves ``thinking`` out (models that think only when
    asked), ``disabled`` and ``between_tools`` send that type (models that think by default; the
    newest refuse ``disabled`` and take ``between_tools``). The ``clear_thinking_*`` edits of
    ``context_management``, which Anthropic accepts only with thinking on, are left out. This is
    Anthropic's advice for a tool loop without its thinking ("To avoid this requirement, disable
    `thinking`"), and its rule of one thinking configuration per assistant turn: the loop began
    without thinking; the next user turn has it again."""
    sent = dict(body)
    if form == "omit":
        sent.pop("thinking", None)
    else:
        sent["thinking"] = {"type": form}
    _drop_thinking_edits(sent)
    return sent


def thinking_within_output_limit(body: dict[str, Any], asked: int, off_form: str = "omit") -> dict[str, Any] | None:
    """The body whose ``max_tokens`` the proxy lowered from the client's ``asked``, with its thinking
    budget fitted to the new limit; None when ``thinking`` goes as the client sent it. Anthropic
    requires ``budget_tokens`` below ``max_tokens``: a budget the client kept below its own limit
    but at or above the lowered one is scaled down with the limit (at least Anthropic's floor of
    1024), and with no room for even that, thinking is off (:func:`with_thinking_off` in the
    model's ``off_form``). Not the proxy's to mend: a budget that still fits, thinking other than
    ``enabled`` with a budget (``adaptive`` has none), or the client's own budget at or above its
    own limit (the interleaved-thinking beta allows that)."""
    thinking, sent = body.get("thinking"), body.get("max_tokens")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled" or not isinstance(sent, int):
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < sent or budget >= asked:
        return None
    if sent <= MIN_THINKING_BUDGET:
        return with_thinking_off(body, off_form)
    return {**body, "thinking": {**thinking, "budget_tokens": max(MIN_THINKING_BUDGET, budget * sent // asked)}}


def _drop_thinking_edits(body: dict[str, Any]) -> None:
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        return
    kept = [e for e in edits if not (isinstance(e, dict) and str(e.get("type", "")).startswith("clear_thinking"))]
    if len(kept) == len(edits):
        return
    if kept or len(management) > 1:
        body["context_management"] = {**management, "edits": kept}
    else:
        del body["context_management"]
