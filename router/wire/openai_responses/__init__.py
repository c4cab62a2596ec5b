"""The OpenAI Responses wire format (stateless): validation, the neutral view, the upstream body, the adapter."""
