"""Seeded stress harness for agent handoffs (issue 8): random schedules, named invariants.

``scenario`` draws a scenario from a seed, ``driver`` runs it on a real ``AgentSession`` wired
to the fakes of :mod:`tests.fakes`, ``invariants`` names what must hold, ``runner`` runs seed
ranges, shrinks failures and is the CLI (``python -m tests.stress --seeds 0:200``).
See docs/stress.md.
"""
