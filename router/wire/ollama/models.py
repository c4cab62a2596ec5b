"""What Ollama's endpoints outside the chat answer: the model list, one model, the version. Pure.

``GET /api/tags`` lists the catalogue and the routing aliases as Ollama lists its local models
(``name``, ``model``, ``modified_at``, ``size``, ``digest``, ``details``); ``POST /api/show`` shows
one: its context window where Ollama's clients look for it (``model_info["<architecture>.context_length"]``,
``num_ctx`` in ``parameters``) and what it can do (``capabilities``: ``completion``, ``tools`` and
``vision`` as the config's ``supports`` says). None of it is a file on disk: the size is 0, the
digest the name's SHA-256, the date the epoch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from router.wire.routes import ListedModel

# The Ollama API version whose shapes the wire follows (clients check it before they use newer fields).
VERSION = "0.13.5"
ARCHITECTURE = "pinch-router"
MODIFIED_AT = "1970-01-01T00:00:00Z"
# The capabilities of the config's `supports` that Ollama names alike (json_mode has no name there).
CAPABILITIES = ("tools", "vision")


DETAILS = {"parent_model": "", "format": ARCHITECTURE, "family": ARCHITECTURE, "families": [ARCHITECTURE], "parameter_size": "", "quantization_level": ""}


def tag(model: ListedModel) -> dict[str, Any]:
    """One model as ``/api/tags`` lists it."""
    digest = hashlib.sha256(model.name.encode()).hexdigest()
    return {"name": model.name, "model": model.name, "modified_at": MODIFIED_AT, "size": 0, "digest": digest, "details": DETAILS}


def tags(models: Sequence[ListedModel]) -> dict[str, Any]:
    return {"models": [tag(m) for m in models]}


def show(model: ListedModel) -> dict[str, Any]:
    """One model as ``/api/show`` shows it."""
    window = model.context_window
    info: dict[str, Any] = {"general.architecture": ARCHITECTURE, "general.basename": model.name}
    if window is not None:
        info[f"{ARCHITECTURE}.context_length"] = window
    return {
        "modelfile": f"# {model.description}\nFROM {model.name}\n" + (f"PARAMETER num_ctx {window}\n" if window is not None else ""),
        "parameters": f"num_ctx {window}" if window is not None else "",
        "template": "{{ .Prompt }}",
        "details": DETAILS,
        "model_info": info,
        "capabilities": ["completion", *(c for c in CAPABILITIES if c in model.capabilities)],
        "modified_at": MODIFIED_AT,
    }


# GET /api/ps: the models loaded in memory here (none: the providers load them)
RUNNING: dict[str, Any] = {"models": []}
