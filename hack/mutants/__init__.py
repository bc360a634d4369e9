"""Hand-made mutants by area: realistic one-line slips (a wrong comparison, a swapped argument, a dropped filter,
a wrong unit or key) planted in the modules a user's figures or cluster depend on, each killed by the named tests.

Each area module holds ``MANUAL``: (id, file, old, new, tests, why), the format of ``hack/mutation.py``'s
``MANUAL`` (a seventh field, True, runs the tests marked slow too); ``hack/mutation_wide.py`` adds them all
to ``WIDE_MANUAL``. Run some with ``python hack/mutation.py manual --manual-id 'deploy-*'``.
"""

from __future__ import annotations

from mutants import capacity, deploy, intervals, publish, report, sim, sweep

Mutant = tuple[str, str, str, str, tuple[str, ...], str] | tuple[str, str, str, str, tuple[str, ...], str, bool]

AREA_MANUAL: tuple[Mutant, ...] = (
    capacity.MANUAL + deploy.MANUAL + publish.MANUAL + report.MANUAL + sim.MANUAL + sweep.MANUAL + intervals.MANUAL
)
