"""flower."""
