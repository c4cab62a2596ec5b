"""pinch-router: a local LLM routing proxy for coding agents."""

__version__ = "0.1.0"
