"""What a table site's fork server loads too (a site whose data file is a CSV or Parquet
table: :func:`fedpca.deployment.site_runtime.clientapp_preloads` names this module after
:mod:`~fedpca.deployment.clientapp_preload`): the table reader's modules and what its first
conversion imports (:func:`fedpca.data.tables.load_reader`: pyarrow's, and pandas where it
is installed), which every task that reads the site's table would otherwise import again
(about 0.4 s of CPU per message). Loaded under the rule of the other modules a message
imports on first use (:func:`~fedpca.deployment.clientapp_preload.room_here`)."""

from __future__ import annotations

from fedpca.data.tables import load_reader
from fedpca.deployment.clientapp_preload import room_here

if room_here():
    load_reader()
