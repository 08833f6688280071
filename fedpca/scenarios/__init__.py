"""Runs on synthetic data, every parameter in one place: one scenario per federated algorithm; no
Flower import."""
