"""Flower App entry points (``flwr run .``): ServerApp and ClientApp objects."""
