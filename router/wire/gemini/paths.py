"""Which requests are a Gemini client's, before any body is read: its paths and its key. Pure.

The HTTP edge answers some requests outside the chain (auth, unknown paths, framing, the model
list): in Google's error shape for a Gemini path (``/v1beta/…``, and ``/v1/models/{model}:{action}``),
and ``GET /v1/models`` — the OpenAI list for every other client — in Google's shape for a client
that sends its key the way Gemini's do (``x-goog-api-key``, or ``?key=``). The key is taken from
``x-goog-api-key`` on any path, from ``?key=`` on the Gemini API's paths only (:data:`API_KEY`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from router.wire.api_keys import KeySource

API_KEY_HEADER = "x-goog-api-key"
API_KEY_QUERY = "key"
# The Gemini API's paths: under /v1beta, or a model's action under /v1/models (…:generateContent).
GEMINI_PATHS = re.compile(r"^/v1beta(?:/|\Z)|^/v1/models/[^:]*:")


def is_gemini_path(path: str) -> bool:
    """A path of the Gemini API: under ``/v1beta``, or a model's action under ``/v1/models`` (``…:generateContent``)."""
    return GEMINI_PATHS.search(path) is not None


def is_gemini_client(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """A client that sends its key as Gemini's SDKs and Gemini CLI do."""
    return API_KEY_HEADER in headers or API_KEY_QUERY in query


# Where a Gemini client sends its key: the header, or the URL as the Gemini API allows (its REST
# examples do) — in the URL on its own paths only.
API_KEY = KeySource(header=API_KEY_HEADER, query=API_KEY_QUERY, query_paths=is_gemini_path)
