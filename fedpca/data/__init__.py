"""Data for fedpca: synthetic models from the papers and loaders for a site's own files."""
