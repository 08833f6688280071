"""Privacy: calibration, accounting and ledgers, mechanisms, clipping, validation; no Flower import."""
