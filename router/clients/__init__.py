"""Outbound I/O over the one shared ClientSession: upstream requests, the stream relay, dependency HTTP, classifier and embeddings clients."""
