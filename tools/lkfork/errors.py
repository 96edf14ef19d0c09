from __future__ import annotations


class ForkError(Exception):
    """A failure the user can act on: the CLI prints the message alone and exits 1."""
