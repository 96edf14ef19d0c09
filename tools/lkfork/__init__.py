"""lkfork: keep the livekit-agents fork as patch series on top of pinned upstream sdists.

Every verb lives in its own module (fetch, prepare, export, build, check, index, pin);
``cli`` wires them to the command line and ``pep517`` exposes the build as an in-tree
PEP 517 backend so each package directory is pip-installable.
"""
