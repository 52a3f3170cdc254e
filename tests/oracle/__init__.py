"""The executable fix-safety oracle (issue #10): program generators, recording stubs, trace comparison.

See :mod:`oracle.programs` (what is generated), :mod:`oracle.runtime` (how it runs),
:mod:`oracle.check` (what must hold) and :mod:`oracle.fixtures` (the codemod fixtures).
"""
