"""The Flower layer's server half: the one Message-API strategy over any algorithm's server, its
legacy-API adapter, the readiness round, the secure aggregation's server, the delivery and the
ServerApp."""
