"""One module per CLI command: ``register(subparsers)`` and ``run(args) -> Report``."""
