"""``python -m hp_invariants`` runs the CLI (as the ``hp-invariants`` console script does)."""

from hp_invariants.cli import run

run()
