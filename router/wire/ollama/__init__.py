"""Ollama's own API (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``, …): its shapes, and the client wire."""
