"""Capability detection and model selection (ARCHITECTURE §8). Pure.

The gate fails closed: a model is a candidate only if it declares every
capability the request needs and its window holds the measured prompt plus room
for the answer. That room is ``routing.min_output_tokens`` (or the requested
output when it is smaller), not the client's whole ``max_tokens``: agents ask
for 16k–64k by default, and the output limit is clamped per candidate instead
(:func:`output_tokens_to_send`) — unless ``routing.output_limit: reject``, which
makes the whole request a need. Among the capable, ranking prefers the wanted tier, then
higher tiers (nearest first), then lower ones; within a rank, higher quality,
then lower cost, then catalogue order. Out-of-tier models are ranked lower,
not rejected, so a request is served when any capable model exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from router.core.results import Candidate, Capabilities, Rejection, Route
from router.core.pinch_ledger import WindowLimit
from router.core.request_view import RequestView
from router.core.tokens import TokenEstimator


class ModelSupports(Protocol):
    tools: bool
    vision: bool
    json_mode: bool


class ModelCost(Protocol):
    input: float
    output: float


class ModelSettings(Protocol):
    """A catalogue model as routing reads it (``router.config.ModelSettings`` is one; the core never imports config)."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def upstream_model(self) -> str: ...
    @property
    def context_window(self) -> int: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def reasoning_content(self) -> bool: ...
    @property
    def thinking_off(self) -> str: ...
    @property
    def binds_thinking(self) -> bool:
        """The model checks the prefix of the signed reasoning sent back (``thinking_binding``, resolved)."""
        ...
    @property
    def supports(self) -> ModelSupports: ...
    @property
    def tool_proficiency(self) -> float: ...
    @property
    def tiers(self) -> list[int]: ...
    @property
    def quality(self) -> float: ...
    @property
    def cost_per_mtok(self) -> ModelCost: ...

def detect_capabilities(
    view: RequestView,
    estimator: TokenEstimator,
    classified_context_tokens: int | None = None,
    counted_prompt_tokens: int | None = None,
    *,
    min_output_tokens: int = 1024,
    clamp_output: bool = True,
) -> Capabilities:
    """What this request needs, measured on what will actually be sent.

    ``counted_prompt_tokens``: the prompt's size when it was already counted
    with the same estimator on what will be sent (pinch's final count, or the
    request as measured when nothing was compressed), so a long transcript is
    not counted twice per request. Compression changes only text, so the
    view's tools, images and JSON mode hold for what is sent.

    Tools count as present when the request offers tools or its history holds
    tool calls or tool results (``view.tools_present``): providers reject tool
    messages for models without tool support.
    """
    prompt_tokens = counted_prompt_tokens if counted_prompt_tokens is not None else estimator.prompt_tokens(view.units, view.tools)
    requested = view.output_limit
    if clamp_output:
        room = min(requested, min_output_tokens) if requested is not None else min_output_tokens
    else:
        room = requested if requested is not None else min_output_tokens
    measured = prompt_tokens + room
    return Capabilities(
        tools_present=view.tools_present,
        has_images=view.has_images,
        require_json_mode=view.json_output,
        prompt_tokens=prompt_tokens,
        requested_output_tokens=requested,
        required_context_tokens=max(measured, classified_context_tokens or 0),
        output_room=room,
        required_output_tokens=None if clamp_output else requested,
        thinking=view.thinking,
    )


def output_tokens_to_send(model: ModelSettings, needs: Capabilities) -> int | None:
    """The output limit to send ``model``: the request's, at most the model's ``max_output_tokens``
    and what its window leaves after the prompt. None when the client set none (none is sent).

    For a model the gate accepted this is at least ``needs.output_room``; under
    ``output_limit: reject`` it is the requested output unchanged.
    """
    if needs.requested_output_tokens is None:
        return None
    return min(needs.requested_output_tokens, model.max_output_tokens, model.context_window - needs.prompt_tokens)


def rejection_reasons(model: ModelSettings, needs: Capabilities, min_tool_proficiency: float) -> tuple[str, ...]:
    reasons = []
    if needs.tools_present and not model.supports.tools:
        reasons.append("does not support tools")
    if needs.tools_present and model.supports.tools and model.tool_proficiency < min_tool_proficiency:
        reasons.append(f"tool proficiency {model.tool_proficiency} is below the minimum {min_tool_proficiency}")
    if needs.has_images and not model.supports.vision:
        reasons.append("does not support images")
    if needs.require_json_mode and not model.supports.json_mode:
        reasons.append("does not support JSON mode")
    if needs.required_context_tokens > model.context_window:
        reasons.append(
            f"context window {model.context_window} is smaller than the {needs.required_context_tokens} tokens needed"
        )
    if needs.required_output_tokens is not None and needs.required_output_tokens > model.max_output_tokens:
        reasons.append(
            f"max output {model.max_output_tokens} is smaller than the requested {needs.required_output_tokens}"
        )
    return tuple(reasons)


def describe_needs(needs: Capabilities) -> str:
    parts = []
    if needs.tools_present:
        parts.append("tools")
    if needs.has_images:
        parts.append("images")
    if needs.require_json_mode:
        parts.append("JSON mode")
    if needs.thinking:
        parts.append("thinking")
    context = f"{needs.required_context_tokens} tokens of context"
    if needs.prompt_tokens + needs.output_room == needs.required_context_tokens:
        context += f" ({needs.prompt_tokens} of prompt + {needs.output_room} for the answer)"
    parts.append(context)
    if needs.required_output_tokens is not None:
        parts.append(f"{needs.required_output_tokens} output tokens")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class NoRoute:
    """No model can serve the request; ``rejected`` says why for each one considered."""

    needs: Capabilities
    rejected: tuple[Rejection, ...]
    # The largest window among the models that lack nothing else, when the context is what is
    # missing: (model, its context window).
    largest_fitting_window: tuple[str, int] | None = None

    def message(self) -> str:
        why = "; ".join(f"{r.model}: {', '.join(r.reasons)}" for r in self.rejected)
        gap = ""
        if self.largest_fitting_window is not None:
            name, window = self.largest_fitting_window
            gap = (
                f" The largest window among the models that meet the other needs is {name}'s {window} tokens: "
                f"the request is {self.needs.required_context_tokens - window} tokens over it."
            )
        return f"no configured model can serve this request (needs {describe_needs(self.needs)}).{gap} {why}"


def _largest_fitting_window(models: Sequence[ModelSettings], needs: Capabilities, min_tool_proficiency: float) -> tuple[str, int] | None:
    """The biggest window among models the context alone rules out (None if the context is not the problem)."""
    no_context_need = replace(needs, required_context_tokens=0)
    fitting = [m for m in models if m.context_window < needs.required_context_tokens and not rejection_reasons(m, no_context_need, min_tool_proficiency)]
    if not fitting:
        return None
    widest = max(fitting, key=lambda m: m.context_window)
    return widest.name, widest.context_window


def _tier_rank(model: ModelSettings, tier: int) -> int:
    if tier in model.tiers:
        return 0
    above = [t - tier for t in model.tiers if t > tier]
    if above:
        return min(above)
    return 1000 + min(tier - t for t in model.tiers)


def select_route(
    models: Sequence[ModelSettings],
    needs: Capabilities,
    tier: int,
    min_tool_proficiency: float = 0.0,
    pinned: str | None = None,
) -> Route | NoRoute:
    """Filter ``models`` by ``needs`` (fail closed) and rank the rest for ``tier``.

    With ``pinned``, only that model is considered (it is still gated).
    """
    considered = [m for m in models if m.name == pinned] if pinned is not None else list(models)
    capable: list[tuple[int, ModelSettings]] = []
    rejected = []
    for index, model in enumerate(considered):
        reasons = rejection_reasons(model, needs, min_tool_proficiency)
        if reasons:
            rejected.append(Rejection(model.name, reasons))
        else:
            capable.append((index, model))
    if not capable:
        return NoRoute(needs=needs, rejected=tuple(rejected), largest_fitting_window=_largest_fitting_window(considered, needs, min_tool_proficiency))
    capable.sort(
        key=lambda item: (
            _tier_rank(item[1], tier),
            -item[1].quality,
            item[1].cost_per_mtok.input + item[1].cost_per_mtok.output,
            item[0],
        )
    )
    return Route(
        candidates=tuple(Candidate(
                m.name, m.provider, m.upstream_model, output_tokens_to_send(m, needs), m.context_window, m.max_output_tokens, m.reasoning_content,
                m.thinking_off, m.binds_thinking,
            ) for _, m in capable),
        tier=tier,
        pinned=pinned is not None,
        rejected=tuple(rejected),
    )


def pinch_windows(
    models: Sequence[ModelSettings],
    needs: Capabilities,
    tier: int,
    min_tool_proficiency: float,
    min_output_tokens: int,
    classified_context_tokens: int | None = None,
    pinned: str | None = None,
) -> tuple[WindowLimit, ...]:
    """The context windows pinch must fit, in the order to try, before the gate has run.

    First the window of the model the gate will prefer for this request on
    everything but its prompt's size (which pinch is about to change) — so a
    session that outgrows its model's window is compressed to stay on that
    model, and its prompt cache with it — then every larger capable window,
    smallest first, for when even compressing everything cannot fit the
    preferred one. A model fits a prompt of ``window − min_output_tokens``
    tokens, the gate's rule. Empty when no model is capable (the gate answers that).
    """
    sizeless = replace(needs, prompt_tokens=0, required_context_tokens=classified_context_tokens or 0)
    route = select_route(models, sizeless, tier, min_tool_proficiency, pinned)
    if isinstance(route, NoRoute):
        return ()
    by_name = {m.name: m for m in models}
    capable = [by_name[c.model] for c in route.candidates]
    preferred = capable[0]
    larger = sorted((m for m in capable if m.context_window > preferred.context_window), key=lambda m: m.context_window)
    return tuple(
        WindowLimit(m.name, m.provider, m.context_window, m.context_window - min_output_tokens, m.binds_thinking)
        for m in [preferred, *larger]
    )
