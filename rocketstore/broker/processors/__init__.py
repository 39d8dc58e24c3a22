"""The broker's request processors, one module per family of request codes. Each processor
gets only what it works with and registers its handlers with ``register_with(server)``."""
