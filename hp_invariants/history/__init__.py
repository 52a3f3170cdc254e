"""History-aware features: stable fingerprints, baseline + ratchet, ``--since REV``, fix pins and
the provenance of missing members (restore from history).

* :mod:`~hp_invariants.history.fingerprint`: a finding's identity across moves and renames;
* :mod:`~hp_invariants.history.baseline`: the committed baseline file and its ratchet;
* :mod:`~hp_invariants.history.git`: the ``git`` calls (subprocess), with clear errors;
* :mod:`~hp_invariants.history.since`: findings introduced relative to a revision;
* :mod:`~hp_invariants.history.pins`: fix pins (``E9590 reverted-fix``, ``W9591 stale-pin``) of any
  finding a commit removed; a rule's own hooks recognise its repairs;
* :mod:`~hp_invariants.history.provenance`: the commit that deleted or renamed a member a class
  lacks (methods, attributes, class attributes), cached per ``HEAD``;
* :mod:`~hp_invariants.history.restore`: that provenance in the finding's message, and the fix from
  history (restore a deleted method, use a renamed member's new name);
* :mod:`~hp_invariants.history.cli`: the subcommands and options, wired into ``hp_invariants.cli``.

The API works on :class:`hp_invariants.model.Finding` objects plus source text, and asks the
registered rules through their optional hooks (:class:`hp_invariants.api.Rule`): it names no rule.
Nothing here is imported on the plain ``check`` path unless a history feature is in use.
"""

BASELINE_FILE = "hp-invariants-baseline.json"
"""The default baseline file name (:data:`hp_invariants.history.baseline.DEFAULT_NAME`)."""

PINS_FILE = "hp-invariants-pins.json"
"""The default pins file name (:data:`hp_invariants.history.pins.DEFAULT_NAME`)."""
