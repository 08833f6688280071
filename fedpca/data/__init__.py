"""Data for fedpca: synthetic models from the papers, offline real data sets and clinical
tables, partitions, loaders for a site's own files and tables, and data contracts."""
