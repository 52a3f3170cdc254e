"""The invariant rules, one module each; :mod:`hp_invariants.registry` lists them."""
