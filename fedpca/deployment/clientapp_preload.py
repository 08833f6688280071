"""What a site's fork server loads before it forks ClientApp tasks
(:data:`fedpca.deployment.site_runtime.CLIENTAPP_PRELOAD` names this module as its first
preload: importing it is the loading; a table site's adds
:mod:`~fedpca.deployment.table_preload`).

Always the modules every task imports (:data:`ALWAYS`: the pinned runtime, the fork
executor's module that every task starts in, Flower's ClientApp runtime and the HTTP
transport of its Runtime API client, fedpca's ClientApp).
Then, if the process's address space leaves room for them (no limit, or at least
:data:`EXTRAS_MIN_MIB`), the modules a message imports on first use (:data:`EXTRAS`: the
privacy accountant, scipy's linear algebra, cryptography's OpenSSL backend). Every forked
task starts with the fork server's whole address space: under a site's smaller ``[limits]
memory-mib`` (512 MiB at least) the extras' hundreds of MB would be taken from every task's
room for its data, so its tasks import them when they need them, as a fresh process does.
Last, BLAS is limited to one thread (:func:`~fedpca.blas.single_thread_blas`, which every
message's ClientApp asks for): the tasks inherit the limit instead of each inspecting the
process's libraries again (~20 ms of CPU per message)."""

from __future__ import annotations

import importlib
import resource

from fedpca.blas import single_thread_blas
from fedpca.deployment.flower_internals import CLIENTAPP_RUNTIME

#: The modules every ClientApp task imports.
ALWAYS = (
    "fedpca.deployment.site_runtime",
    "fedpca.deployment.task_forks",
    CLIENTAPP_RUNTIME,
    "fedpca.flower.app",
    "httpcore",
)
#: The modules a message imports on first use.
EXTRAS = (
    "dp_accounting.pld",
    "dp_accounting.rdp",
    "scipy.linalg",
    "cryptography.hazmat.backends.openssl",
)
#: The smallest address space limit (MiB) under which :data:`EXTRAS` are loaded too.
EXTRAS_MIN_MIB = 2048


def room_for_extras(limit: int) -> bool:
    """Whether an address space limit of ``limit`` bytes (``resource.RLIM_INFINITY``: none)
    leaves room for :data:`EXTRAS` in every task."""
    return limit == resource.RLIM_INFINITY or limit >= EXTRAS_MIN_MIB * 2**20


def room_here() -> bool:
    """:func:`room_for_extras` for this process's own address space limit."""
    return room_for_extras(resource.getrlimit(resource.RLIMIT_AS)[0])


for _name in ALWAYS:
    importlib.import_module(_name)
if room_here():
    for _name in EXTRAS:
        importlib.import_module(_name)
single_thread_blas()
