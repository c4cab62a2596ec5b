"""Session state, in this process or on Redis: classifications, pinch ledgers, escalation, remembered requests."""
