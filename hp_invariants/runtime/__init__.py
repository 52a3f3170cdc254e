"""The runtime harness: ``hp-invariants run`` and the ``world_size`` pytest marker.

The rules read the code; the harness runs it. ``hp-invariants run -- SCRIPT`` starts the user's
unchanged training script as N local ranks with torchrun's environment, one world size after
another, and checks at run time the invariants whose loss made every example training of the seed
incident crash before step 1 (the same four classes as rules E9501-E9504), then compares the global
loss across world sizes. The pytest plugin (:mod:`hp_invariants.runtime.pytest_plugin`) runs a test
body the same way.

Modules:

* :mod:`~hp_invariants.runtime.command`: the ``run`` subcommand (flags, exit codes);
* :mod:`~hp_invariants.runtime.launcher`: the ranks' processes (environment, free port, timeout,
  stacks, cleanup) and the aggregation of one world size;
* :mod:`~hp_invariants.runtime.rank`: the start-up of one rank (``python -m
  hp_invariants.runtime.rank``): hooks, then the script as ``__main__``, then its result file;
* :mod:`~hp_invariants.runtime.checks`: the torch-side hooks and checks (the only module that
  imports torch, and only inside functions, in the ranks);
* :mod:`~hp_invariants.runtime.classify`: a rank's exception -> the rule class, as data, and the
  static ``check`` finding on the script's files;
* :mod:`~hp_invariants.runtime.report`: world-size results, the loss comparison, text and JSON.

Nothing here imports torch at import time: the launcher process (the CLI, pytest) never needs it.
"""
