"""Translations between wire formats, keyed by (client wire, provider wire): bodies, answers and streams."""
