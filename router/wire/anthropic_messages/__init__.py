"""The Anthropic Messages wire format: validation, the neutral view, thinking, the upstream body, errors, the adapter."""
