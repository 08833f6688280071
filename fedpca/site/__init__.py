"""A real site, Flower-free: what it plans for a run and what it answers (the trust boundary)."""
