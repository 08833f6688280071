"""A small data contract and a table that meets it, shared by the contract's tests."""

import numpy as np

CONTRACT = """\
# the consortium's contract
[contract]
name = "liver-v1"

[[column]]
name = "bili"
kind = "numeric"
range = [0.1, 30.0]   # mg/dL
transform = "log"
missing = "impute"
impute = 1.0

[[column]]
name = "age"
kind = "numeric"
range = [0, 110]
missing = "refuse"

[[column]]
name = "sex"
kind = "categorical"
levels = ["f", "m"]

[[column]]
name = "alb"
kind = "numeric"
range = [1, 6]

[[column]]
name = "smoker"
kind = "binary"
missing = "refuse"
"""


def liver_table(rows: int = 40, sex=("f", "m", None), seed: int = 3) -> str:
    """A CSV table meeting :data:`CONTRACT` (columns in another order): every 7th ``alb``
    blank, ``bili`` above its range (40) in rows 5, 16, 27 and 38, ``sex`` cycling through
    ``sex``."""
    rng = np.random.default_rng(seed)
    lines = ["sex,smoker,alb,age,bili"] + [
        f"{sex[i % len(sex)] or ''},{i % 2},{'' if i % 7 == 0 else round(rng.uniform(1, 6), 1)},"
        f"{rng.integers(20, 90)},{40 if i % 11 == 5 else round(rng.uniform(0.2, 20), 2)}"
        for i in range(rows)]
    return "\n".join(lines) + "\n"
