"""Data for fedpca: synthetic models from the papers, offline real data sets, partitions
and loaders for a site's own files."""
