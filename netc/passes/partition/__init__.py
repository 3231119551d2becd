"""The partition pass (partition.py; docs/partitioning.md): every op placed on one of K workers,
every crossing explicit. Its two lowerings: SINGA's graph construction (singa.py) and netc's typed
collectives (collectives.py); what both share is common.py. Importing this package registers the
pass."""
from .common import has_partitioning, is_partitioned, make_op  # noqa: F401  (cli, split-workers)
from .partition import Partition  # noqa: F401  (registers the pass)
