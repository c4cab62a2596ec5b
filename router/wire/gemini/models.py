"""What the Gemini API's endpoints outside the chain answer: the model list, one model, a token count. Pure.

``GET /v1beta/models`` lists the catalogue and the routing aliases as Google's ``Model`` objects
(``name: "models/<name>"``, token limits, the generation methods served); ``countTokens`` counts
a request's contents (plain, or inside ``generateContentRequest``) with the project's one
estimator, the units pinch and the gate count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.core.errors import InvalidRequest
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.wire.gemini.parts import CONTENTS, SYSTEM, TOOLS, field
from router.wire.routes import ListedModel
from router.wire.gemini.validation import validate_gemini_body
from router.wire.gemini.view import GeminiConversation

METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def model_entry(model: ListedModel) -> dict[str, Any]:
    """One model as Google's ``Model`` resource."""
    entry: dict[str, Any] = {
        "name": f"models/{model.name}",
        "baseModelId": model.name,
        "version": "pinch-router",
        "displayName": model.name,
        "description": model.description,
        "supportedGenerationMethods": METHODS,
    }
    if model.context_window is not None:
        entry["inputTokenLimit"] = model.context_window
    if model.max_output_tokens is not None:
        entry["outputTokenLimit"] = model.max_output_tokens
    return entry


def model_list(models: Sequence[ListedModel]) -> dict[str, Any]:
    """The models as Google's list (one page)."""
    return {"models": [model_entry(m) for m in models]}


def count_tokens(body: Any, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    """The input tokens of a ``countTokens`` body; :class:`~router.core.errors.InvalidRequest` naming
    what is wrong. Never 0 for a valid body."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    request = body.get("generateContentRequest", body.get("generate_content_request"))
    if request is not None:
        if not isinstance(request, dict):
            raise InvalidRequest("generateContentRequest: must be an object", "generateContentRequest")
        body = request
    if field(body, CONTENTS) is None and request is None:
        raise InvalidRequest("contents: a non-empty list of Content objects is required", "contents")
    parsed = validate_gemini_body(body, None, "generateContent")
    units = GeminiConversation(field(body, SYSTEM), parsed.contents).units
    return max(1, estimator.prompt_tokens(list(units), field(body, TOOLS) or None))


def count_tokens_answer(body: dict[str, Any], estimator: TokenEstimator) -> tuple[int, dict[str, Any]]:
    """``countTokens``: the figure and Google's ``{"totalTokens"}``."""
    counted = count_tokens(body, estimator)
    return counted, {"totalTokens": counted}
