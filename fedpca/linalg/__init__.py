"""Linear algebra: subspaces and eigensolvers, the Fantope projection, Bingham sampling; no Flower
import."""
