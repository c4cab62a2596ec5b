"""What the Gemini API's endpoints outside the chain answer: the model list, one model, a token count. Pure.

``GET /v1beta/models`` lists the catalogue and the routing aliases as Google's ``Model`` objects
(``name: "models/<name>"``, token limits, the generation methods served); ``countTokens`` counts
a request's contents (plain, or inside ``generateContentRequest``) with the project's one
estimator, the units pinch and the gate count.
"""

from __future__ import annotations

from typing import Any

from router.core.errors import InvalidRequest
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.wire.gemini.parts import CONTENTS, SYSTEM, TOOLS, field
from router.wire.gemini.validation import validate_gemini_body
from router.wire.gemini.view import GeminiConversation

METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def model_entry(name: str, input_limit: int | None = None, output_limit: int | None = None, description: str = "") -> dict[str, Any]:
    """One model as Google's ``Model`` resource."""
    entry: dict[str, Any] = {
        "name": f"models/{name}",
        "baseModelId": name,
        "version": "pinch-router",
        "displayName": name,
        "description": description,
        "supportedGenerationMethods": METHODS,
    }
    if input_limit is not None:
        entry["inputTokenLimit"] = input_limit
    if output_limit is not None:
        entry["outputTokenLimit"] = output_limit
    return entry


def model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"models": entries}


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
