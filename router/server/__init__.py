"""The composition root: the app, the live chain, the stage registry, serving as a service, workers, doctor."""
