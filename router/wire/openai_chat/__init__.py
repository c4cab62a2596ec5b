"""The OpenAI chat-completions wire format: validation, the neutral view, the upstream body, errors, the adapter."""
