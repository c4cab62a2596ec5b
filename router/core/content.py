"""Content as the wire formats write it: a string, or a list of typed parts (text, images). Pure.

``Message`` is any role-tagged message (chat's, a Responses message item, the classifier's prompt);
the part types are every format's names for text and image parts."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]

TEXT_PART_TYPES = frozenset({"text", "input_text"})
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str)
        )
    return ""


def has_image_part(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES for part in content
    )
