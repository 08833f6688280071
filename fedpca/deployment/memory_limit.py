"""A site's memory limit: what a FAB or a request can make its processes allocate.

A coordinator can make a site's processes allocate: a FAB of 200 KB whose ``pyproject.toml``
expands to 100 MB costs about 300 MB in the SuperNode, where Flower parses it
(``get_fused_config_from_fab``) before any fedpca code sees it, and Flower accepts FABs up
to 10 MB. On Linux, ``fedpca site supernode`` and ``fedpca site superexec`` set the address
space limit ``RLIMIT_AS`` of their own process to the site policy's ``[limits] memory-mib``
before they start anything; every process they start (the SuperExec's ClientApp processes)
inherits it. An allocation past it fails in that process alone (``MemoryError``), never the
host. Elsewhere, or with ``memory-mib = 0``, the operator limits memory with the operating
system (``prlimit --as``, systemd ``MemoryMax=``, a container's limit).

``RLIMIT_AS`` bounds *virtual* memory, which is larger than what is resident: an idle
SuperNode maps about 450 MB, an idle ClientApp about 370 MB (Flower 1.41, Python 3.11).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

#: Bytes in one MiB.
MIB = 1024 * 1024


def apply_memory_limit(mib: int) -> int | None:
    """Limit the address space of this process and of every process it starts afterwards to
    ``mib`` MiB (never raising a lower limit already set); return the limit in bytes, or
    ``None`` when ``mib`` is 0 or the operating system offers no such limit (logged)."""
    if mib == 0:
        logger.info("memory: no limit from the site's policy (memory-mib = 0)")
        return None
    try:
        import resource
    except ImportError:  # not a Unix
        logger.warning("memory: this operating system offers no RLIMIT_AS; limit the site's "
                       "processes with its own tools (memory-mib = %d not applied)", mib)
        return None
    limit = mib * MIB
    for current in resource.getrlimit(resource.RLIMIT_AS):
        if current != resource.RLIM_INFINITY:
            limit = min(limit, current)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    logger.info("memory: address space limited to %d MiB for this process and its children",
                limit // MIB)
    return limit
