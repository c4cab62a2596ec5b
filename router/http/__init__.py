"""The inbound HTTP edge: reading bodies, framing errors, unknown paths, response headers, the endpoints outside the chain."""
