"""In-process Flower simulations (Ray backend) of fedpca's algorithms."""
