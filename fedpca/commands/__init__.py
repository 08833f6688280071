"""The ``fedpca`` sub-commands: ``simulate`` (:mod:`fedpca.commands.simulate`, one
sub-command per algorithm of :mod:`fedpca.algorithms.specs`), ``audit``, ``site``, ``show``;
flags and outputs every simulation shares live in :mod:`fedpca.commands.common`."""
