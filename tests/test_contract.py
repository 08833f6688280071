"""The data contract (fedpca.data.contract): parsing and its refusals, the canonical hash,
what a site's table must be, and the preprocessing every site applies; the template ``fedpca
contract init`` writes."""

import math
import re
import tomllib

import numpy as np
import pytest

from fedpca.cli import main as cli_main
from fedpca.data.contract import ContractError, load_contract, parse_contract
from fedpca.data.contract_template import contract_template
from fedpca.errors import InvalidDataError
from liver_contract import CONTRACT, SCALED, WITH_ID

#: The same contract: other comments, layout and key order, defaults spelled out.
REWRITTEN = """\
[contract]
extra-columns = "refuse"
name = "liver-v1"
[[column]]
transform = "log"
name = "bili"
impute = 1
missing = "impute"
range = [ 0.1, 30 ]
kind = "numeric"
[[column]]
name = "age"
kind = "numeric"
missing = "refuse"
transform = "none"
range = [0.0, 110.0]
[[column]]
name = "sex"
kind = "categorical"
levels = ["f", "m"]
unknown = "refuse"
missing = "indicator"
[[column]]
name = "alb"
kind = "numeric"
range = [1, 6]
missing = "indicator"
[[column]]
name = "smoker"
kind = "binary"
levels = ["0", "1"]
missing = "refuse"
"""
#: The contract's hash, fixed: a fedpca release that changed it would make every site refuse
#: runs of the consortium that agreed on it.
HASH = "1e3cafbe8f8cbfa14e5aa925f95210b5f6c3a998d6a479acf79ce202b4c1c8e2"


def contract(text=CONTRACT):
    return parse_contract(tomllib.loads(text), "liver.toml")


def table(**changes):
    columns = {
        "bili": np.array([0.05, 1.0, np.nan, 50.0]),
        "age": np.array([20.0, 120.0, 0.0, 55.0]),
        "sex": np.array(["f", "m", None, "m"], dtype=object),
        "alb": np.array([np.nan, 3.5, 7.0, 1.0]),
        "smoker": np.array([0.0, 1.0, 1.0, 0.0]),
    }
    columns.update(changes)
    return {name: values for name, values in columns.items() if values is not None}


# --- preprocessing ----------------------------------------------------------------------------

def test_preprocessing_imputes_flags_clips_transforms_shifts_and_one_hot_encodes():
    matrix, columns = contract().preprocess(table())
    assert columns == ("bili", "age", "sex=f", "sex=m", "sex:missing", "alb", "alb:missing",
                       "smoker")
    expected = np.array([
        # bili: log(clip(x, 0.1, 30)) - log(0.1), the blank imputed with 1.0
        [0.0, math.log(10), math.log(10), math.log(300)],
        [20, 110, 0, 55],                      # age clipped to [0, 110]
        [1, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 0],  # sex: one-hot, the blank its own column
        [2.5, 2.5, 5, 0],                      # alb - 1: the blank at w/2, 7 clipped to 6
        [1, 0, 0, 0],                          # alb:missing
        [0, 1, 1, 0],                          # smoker
    ]).T
    np.testing.assert_allclose(matrix, expected, atol=1e-15)


def test_widths_and_sensitivities_come_from_the_contract_alone():
    parsed = contract()
    np.testing.assert_allclose(parsed.widths, [math.log(300), 110, 1, 1, 1, 5, 1, 1])
    matrix, _ = parsed.preprocess(table())
    assert (matrix >= 0).all() and (matrix <= parsed.widths).all()
    # a one-hot group counts sqrt(2) once, not once per level
    diameters = [math.log(300), 110, math.sqrt(2), 5, 1, 1]
    assert parsed.bounds.sum_sensitivity() == pytest.approx(math.hypot(*diameters))
    squares = [math.log(300) ** 2, 110 ** 2, math.sqrt(2), 25, 1, 1]
    assert parsed.bounds.groups == ((2, 3, 4),)  # sex=f, sex=m, sex:missing
    assert parsed.bounds.square_sum_sensitivity() == pytest.approx(math.hypot(*squares))
    # no two rows' sums differ by more: the worst pair of rows the contract allows
    low = np.zeros(len(parsed.widths))
    high = parsed.widths.copy()
    high[[2, 4]] = 0.0  # sex=m on one row, sex=f on the other
    low[2] = 1.0
    assert np.linalg.norm(high - low) == pytest.approx(parsed.bounds.sum_sensitivity())


def test_a_binary_column_may_name_its_two_levels_and_integers_are_levels():
    parsed = contract(CONTRACT.replace('levels = ["f", "m"]', 'levels = [1, 2]\nunknown = '
                                       '"missing"').replace(
        'kind = "binary"', 'kind = "binary"\nlevels = ["no", "yes"]'))
    matrix, columns = parsed.preprocess(table(
        sex=np.array([1.0, 2.0, 3.0, np.nan]),
        smoker=np.array(["no", "yes", "yes", "no"], dtype=object)))
    assert columns[2:5] == ("sex=1", "sex=2", "sex:missing")
    np.testing.assert_array_equal(matrix[:, 2:5], [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]])
    np.testing.assert_array_equal(matrix[:, -1], [0, 1, 1, 0])


# --- what is wrong with a site's table --------------------------------------------------------

@pytest.mark.parametrize("changes,problem", [
    ({"sex": np.array(["f", "x", "m", "m"], dtype=object)},
     r"column 'sex' has 1 cells that are not one of its levels \['f', 'm'\]"),
    ({"age": None}, r"column 'age' is missing from the table"),
    ({"id": np.arange(4.0)}, r"column 'id' is not in the contract"),
    ({"age": np.array([20.0, np.nan, np.nan, 1.0])},
     r"column 'age' has 2 blank cells but the contract says missing = \"refuse\""),
    ({"age": np.array(["20", "old", "3", "1"], dtype=object)},
     r"column 'age' holds text where the contract says numeric"),
    ({"smoker": np.array([0.0, 2.0, 1.0, 0.0])},
     r"column 'smoker' has 1 cells that are not one of its levels \['0', '1'\]"),
    ({"alb": np.array([1.0, np.inf, 2.0, 3.0])}, r"column 'alb' has 1 infinite cells"),
])
def test_a_table_that_breaks_the_contract_is_refused_with_the_column_and_the_rule(
        changes, problem):
    parsed = contract()
    report = parsed.check(table(**changes))
    assert not report.ok and len(report.problems) == 1
    assert re.search(problem, report.problems[0])
    with pytest.raises(InvalidDataError, match=rf"clinic: the table does not meet contract "
                                               rf"'liver-v1': 1 problem\(s\): {problem}"):
        parsed.preprocess(table(**changes), site="clinic")


def test_notes_count_what_preprocessing_does_and_rules_relax_refusals():
    report = contract().check(table())
    assert report.ok and report.rows == 4
    assert report.notes == (
        "column 'bili': 1 blank cells are imputed",
        "column 'bili': 2 values outside the range [0.1, 30] are clipped into it",
        "column 'age': 1 values outside the range [0, 110] are clipped into it",
        "column 'sex': 1 blank cells are flagged in sex:missing",
        "column 'alb': 1 blank cells are flagged in alb:missing",
        "column 'alb': 1 values outside the range [1, 6] are clipped into it")
    relaxed = contract(CONTRACT.replace('name = "liver-v1"', 'name = "liver-v1"\n'
                                        'extra-columns = "ignore"').replace(
        'levels = ["f", "m"]', 'levels = ["f", "m"]\nunknown = "missing"'))
    odd = table(id=np.arange(4.0), sex=np.array(["f", "x", "m", "m"], dtype=object))
    matrix, columns = relaxed.preprocess(odd)
    assert "id" not in columns and matrix[1, columns.index("sex:missing")] == 1.0
    assert "column 'sex': 1 cells outside its levels are taken as blanks" in \
        relaxed.check(odd).notes


# --- parsing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("old,new,problem", [
    ('range = [0, 110]', 'range = []', r"range is not filled in for 1 numeric column\(s\) "
                                       r"\['age'\]: write range = \[low, high\] from public "
                                       r"knowledge"),
    ('range = [0, 110]', '', r"range is not filled in for 1 numeric column\(s\) \['age'\]"),
    ('range = [0, 110]', 'range = [110, 0]', r"range = \[110, 0\] must have low < high"),
    ('range = [0, 110]', 'range = [0, inf]', r"must be \[low, high\], two finite numbers"),
    ('range = [0.1, 30.0]', 'range = [0, 30.0]',
     r"column 'bili': transform = 'log' needs a range above 0, got low = 0"),
    ('kind = "binary"', 'kind = "boolean"', r"kind = 'boolean' must be one of"),
    ('missing = "impute"\nimpute = 1.0', 'missing = "drop"',
     r"column 'bili': missing = \"drop\" is not supported yet: dropping a row makes the "
     r"site's record count depend on the records"),
    ('range = [0, 110]', 'rnage = [0, 110]', r"unknown keys \['rnage'\] in column 'age'"),
    ('levels = ["f", "m"]', 'levels = ["f"]', r"levels = \['f'\] must be at least 2"),
    ('levels = ["f", "m"]', 'levels = ["f", "f"]', r"must be at least 2 distinct levels"),
    ('impute = 1.0', 'impute = 40.0', r"impute = 40.0 must be a number in the range \[0.1, 30\]"),
    ('\nimpute = 1.0', '', r"missing = \"impute\" needs impute = VALUE"),
    ('kind = "binary"', 'kind = "binary"\nrange = [0, 1]',
     r"range does not apply to a binary column"),
    ('name = "liver-v1"', '', r"\[contract\] name must be a non-empty string"),
    ('name = "alb"', 'name = "age"', r"column 'age' is listed twice"),
])
def test_a_bad_contract_is_refused_naming_the_file_the_column_and_the_fix(old, new, problem):
    assert old in CONTRACT
    with pytest.raises(ContractError, match=rf"^contract liver.toml: .*{problem}"):
        contract(CONTRACT.replace(old, new, 1))


def test_every_problem_is_listed_at_once_and_a_file_is_named(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONTRACT.replace("range = [0, 110]", "range = []")
                    .replace("range = [1, 6]", "range = []"))
    path.write_text(CONTRACT.replace("range = [0, 110]", "range = []")
                    .replace("range = [1, 6]", "range = []")
                    .replace('kind = "binary"', 'kind = "boolean"'))
    with pytest.raises(ContractError) as error:
        load_contract(path)
    # one sentence for every range to fill in, after the other problems
    assert re.fullmatch(rf"contract {path}: column 'smoker': kind = 'boolean' must be one of "
                        r".*; range is not filled in for 2 numeric column\(s\) \['age', "
                        r"'alb'\]: write range = \[low, high\] from public knowledge \(.*\), "
                        r"never from the data", str(error.value))
    assert str(error.value).count("public knowledge") == 1
    path.write_text("[contract\n")
    with pytest.raises(ContractError, match=rf"contract {path} cannot be read: "):
        load_contract(path)
    with pytest.raises(ContractError, match="does not exist; write one with fedpca contract"):
        load_contract(tmp_path / "absent.toml")


# --- the hash --------------------------------------------------------------------------------

def test_the_hash_ignores_comments_layout_key_order_and_spelled_out_defaults():
    parsed = contract()
    assert contract(REWRITTEN).hash == parsed.hash == HASH
    assert contract(REWRITTEN) == parsed


@pytest.mark.parametrize("old,new", [
    ('range = [0, 110]', 'range = [0, 120]'),            # a wider range: more noise needed
    ('transform = "log"', 'transform = "log1p"'),
    ('levels = ["f", "m"]', 'levels = ["m", "f"]'),      # the one-hot order is the output order
    ('name = "liver-v1"', 'name = "liver-v2"'),
    ('missing = "refuse"\n\n[[column]]\nname = "sex"', 'missing = "indicator"\n\n[[column]]\n'
                                                       'name = "sex"'),
])
def test_every_change_that_matters_changes_the_hash(old, new):
    assert old in CONTRACT
    assert contract(CONTRACT.replace(old, new, 1)).hash != HASH


def test_the_column_order_is_the_output_order_and_part_of_the_hash():
    blocks = CONTRACT.split("[[column]]")
    swapped = contract("[[column]]".join([blocks[0], blocks[2], blocks[1], *blocks[3:]]))
    assert swapped.output_columns[:2] == ("age", "bili") and swapped.hash != HASH


# --- fedpca contract init --------------------------------------------------------------------

def test_contract_init_writes_a_template_that_parses_with_guessed_kinds_and_no_range(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site.csv").write_text(
        "id,weight,smoker,stage,crp\n"
        + "".join(f"{i},{60 + i}.5,{i % 2},{('I', 'II', 'III')[i % 3]},{'' if i % 5 else 3.25}\n"
                  for i in range(25)))
    assert cli_main(["contract", "init", "--from", "site.csv"]) == 0
    out = capsys.readouterr().out
    text = (tmp_path / "contract.toml").read_text()
    raw = tomllib.loads(text)
    assert raw["contract"]["name"] == "site-v1"
    kinds = {c["name"]: (c["kind"], c.get("levels"), c.get("missing")) for c in raw["column"]}
    assert kinds == {"id": ("id", None, None), "weight": ("numeric", None, "refuse"),
                     "smoker": ("binary", None, "refuse"),
                     "stage": ("categorical", ["I", "II", "III"], "refuse"),
                     "crp": ("numeric", None, "indicator")}
    assert "84.5" not in text and "3.25" not in text  # no observed value in the contract
    assert "weight: 60.5 .. 84.5" in out and "NOT public" in out  # the operator's terminal
    assert ("column 'id' has a different value in every row: an identifier? proposed as kind "
            '= "id"') in out
    assert "range is not filled in for 2 numeric column(s) ['weight', 'crp']" in out
    assert out.count("never from the data") == 1  # one sentence, not one per column
    with pytest.raises(ContractError, match=r"\['weight', 'crp'\]"):
        load_contract("contract.toml")
    filled = iter(["[20, 300]", "[0.1, 500]"])
    text = re.sub(r"range = \[\]", lambda _: f"range = {next(filled)}", text)
    (tmp_path / "contract.toml").write_text(text)
    loaded = load_contract("contract.toml")
    assert loaded.output_columns == (
        "weight", "smoker", "stage=I", "stage=II", "stage=III", "crp", "crp:missing")
    assert loaded.id_column == "id"
    assert cli_main(["contract", "init", "--from", "site.csv"]) == 2  # never overwritten


def test_a_template_lists_every_text_level_and_flags_free_text():
    values = np.array([f"note {i % 25}" for i in range(30)] + [None], dtype=object)
    template = contract_template({"note": values}, "x", "notes.csv")
    assert template.warnings == ("column 'note' has 25 distinct texts: free text or an "
                                 "identifier? leave it out of the contract and the export",)
    assert 'missing = "indicator"' in template.text


def test_a_template_proposes_kind_id_for_text_ids_and_writes_none_of_them():
    ids = np.array([f"P{i:04d}" for i in range(30)], dtype=object)
    template = contract_template({"pid": ids, "x": np.arange(30.0) % 3}, "x", "t.csv")
    raw = tomllib.loads(template.text)
    assert raw["column"][0] == {"name": "pid", "kind": "id"}
    assert "P0007" not in template.text
    assert template.warnings[0].startswith("column 'pid' has a different value in every row")


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # `fedpca contract show contract.toml | head -1`: the pipe closes before the output ends
    import subprocess
    import sys

    (tmp_path / "contract.toml").write_text(CONTRACT)
    shown = subprocess.run(
        f"{sys.executable} -m fedpca.cli contract show {tmp_path / 'contract.toml'} | head -1",
        shell=True, capture_output=True, text=True, check=False)
    assert shown.stdout.startswith("contract ") and shown.stdout.count("\n") == 1
    assert "Traceback" not in shown.stderr and "BrokenPipe" not in shown.stderr


# --- public scales ---------------------------------------------------------------------------

def test_public_scales_are_parsed_in_the_columns_units_and_make_the_bounds():
    parsed = contract(SCALED)
    assert parsed.bounds.scales == (0.9, 110 / 4, 0.5, 0.5, 0.2, None, None, 0.45)
    assert parsed.bounds.squared() == (5, 6)  # alb and alb:missing
    assert parsed.columns[1].scale == "range" and parsed.columns[0].scale == 0.9
    # a scale does not change the preprocessing, only what a standardised run releases
    assert parsed.preprocess(table()).matrix.tolist() == contract().preprocess(
        table()).matrix.tolist()
    assert contract().bounds.scales == ()  # none given: every scale private, as before


def test_a_public_scale_is_part_of_the_hash_and_spelling_does_not_matter():
    hashes = {contract(SCALED).hash, contract(SCALED.replace("scale = 0.9", "scale = 0.8")).hash,
              contract(SCALED.replace('scale = "range"', "scale = 27.5")).hash, HASH}
    assert len(hashes) == 4  # "range" is the rule, not the number it gives today
    assert contract(SCALED.replace("scale = 0.45", "scale = 4.5e-1")).hash == \
        contract(SCALED).hash


@pytest.mark.parametrize("old,new,problem", [
    ('transform = "log"', 'transform = "log"\nscale = 4.0',
     r"column 'bili': scale = 4.0 must lie in \[1e-06 w, w / 2\] = \[5.7e-06, 2.852\] for its "
     r"width w = 5.704; it is a standard deviation of the natural log of the value"),
    ('kind = "binary"', 'kind = "binary"\nscale = "range"',
     r"column 'smoker': scale = 'range' must be a number: the column's public standard"),
    ('kind = "binary"', 'kind = "binary"\nscale = 0.6', r"sqrt\(p \(1 - p\)\) for a public "
                                                        r"prevalence p"),
    ('levels = ["f", "m"]', 'levels = ["f", "m"]\nscale = [0.5, 0.5]',
     r"column 'sex': scale = \[0.5, 0.5\] must be a list of 3 numbers, one standard deviation "
     r"per output column \['sex=f', 'sex=m', 'sex:missing'\]"),
    ("range = [0, 110]", 'range = [0, 110]\nscale = "wide"',
     r"scale = 'wide' must be a number or \"range\""),
])
def test_a_bad_public_scale_is_refused_with_its_units(old, new, problem):
    with pytest.raises(ContractError, match=problem):
        contract(CONTRACT.replace(old, new, 1))


# --- the id column ---------------------------------------------------------------------------

def test_the_id_column_is_never_an_output_nor_in_any_bound():
    parsed = contract(WITH_ID)
    assert parsed.id_column == "pid" and contract().id_column is None
    assert parsed.output_columns == contract().output_columns
    assert parsed.bounds == contract().bounds
    assert parsed.hash != HASH  # the consortium agreed on it: part of the contract
    ids = np.array(["a7", "b2", "c9", "d1"], dtype=object)
    matrix, _ = parsed.preprocess(table(pid=ids))
    np.testing.assert_array_equal(matrix, contract().preprocess(table()).matrix)
    assert parsed.ids(table(pid=ids)).tolist() == ["a7", "b2", "c9", "d1"]
    assert contract(WITH_ID.replace('kind = "id"', 'kind = "id"  # ours')) == parsed


@pytest.mark.parametrize("ids, problem", [
    (np.array(["a7", None, "c9", None], dtype=object), "id column 'pid' has 2 blank cells"),
    (np.array([1017.0, 1017.0, 1017.0, 2.0]), "id column 'pid' has 2 cells repeating an id"),
    (np.array([1.0, np.nan, 1.0, 2.0]), "id column 'pid' has 1 blank cells"),
])
def test_a_blank_or_repeated_id_is_a_problem_counted_never_quoted(ids, problem):
    report = contract(WITH_ID).check(table(pid=ids))
    assert not report.ok and any(p.startswith(problem) for p in report.problems)
    text = " ".join(report.problems + report.notes)
    assert "1017" not in text and "a7" not in text and "c9" not in text


@pytest.mark.parametrize("old,new,problem", [
    ('kind = "id"', 'kind = "id"\nmissing = "refuse"', "missing does not apply to an id column"),
    ('name = "pid"\nkind = "id"', 'name = "pid"\nkind = "id"\n\n[[column]]\nname = "mrn"\n'
                                  'kind = "id"', r"columns \['pid', 'mrn'\] are all kind = "
                                                 r"\"id\": a contract has at most one"),
])
def test_an_id_column_takes_nothing_but_its_name_and_there_is_one(old, new, problem):
    with pytest.raises(ContractError, match=problem):
        contract(WITH_ID.replace(old, new, 1))
    only_id = '[contract]\nname = "x"\n[[column]]\nname = "pid"\nkind = "id"\n'
    with pytest.raises(ContractError, match="no column but its id"):
        contract(only_id)


def test_contract_show_names_the_public_scales_and_the_id_column(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(SCALED.replace(
        "[[column]]", '[[column]]\nname = "pid"\nkind = "id"\n\n[[column]]', 1))
    assert cli_main(["contract", "show", str(tmp_path / "c.toml")]) == 0
    out = capsys.readouterr().out
    assert "pid              id           -> never sent (the ids)" in out
    assert "bili [0, 5.704] scale 0.9" in out and "age [0, 110] scale 27.5" in out
    assert ("8 output columns, 6 with a public scale; replace-one L2 sensitivity of a site's "
            "column sums 110.3, of its sums of squares (of the 2 columns without a public "
            "scale) 25.02") in out  # sqrt(5^4 + 1): alb and its indicator
