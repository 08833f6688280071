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
#: :data:`CONTRACT` with public scales: bili's in log units, age's by the range rule, the
#: sex group's per output column (its blank's included), smoker's; alb and its indicator
#: keep theirs private.
SCALED = (CONTRACT
          .replace('transform = "log"', 'transform = "log"\nscale = 0.9')
          .replace("range = [0, 110]", 'range = [0, 110]\nscale = "range"')
          .replace('levels = ["f", "m"]', 'levels = ["f", "m"]\nscale = [0.5, 0.5, 0.2]')
          .replace('kind = "binary"', 'kind = "binary"\nscale = 0.45'))
#: :data:`SCALED` with alb imputed (no indicator) and its scale public too: every column's.
ALL_SCALED = SCALED.replace('range = [1, 6]', 'range = [1, 6]\nmissing = "impute"\nimpute = '
                            '3.5\nscale = 0.6')
#: :data:`CONTRACT` with the site's own record ids in column ``pid``.
WITH_ID = CONTRACT.replace("[[column]]", '[[column]]\nname = "pid"\nkind = "id"\n\n[[column]]', 1)


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
