"""``python -m hp_invariants`` runs the CLI."""

import sys

from hp_invariants.cli import main

sys.exit(main())
