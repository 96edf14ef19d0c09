"""The parity corpus: upstream behaviour, pinned as it is, that must hold on stock AND on the fork.

A test here carries no marker and passes on both builds (`make parity` runs it on each). One
that fails on stock is not a parity test but a bug report: mark it ``upstream_bug(...)`` and
move it to ``tests/regression``, or file it.
"""
