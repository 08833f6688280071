"""What the table checks tell an operator: ``fedpca contract check`` names every table it
cannot read and checks the others, text in a numeric column is counted (never quoted), and
``fedpca simulate --tables`` names a table's site by its number and file."""

import tomllib

import numpy as np

from fedpca.cli import main as cli_main
from fedpca.data.contract import parse_contract
from liver_contract import CONTRACT, liver_table


def test_contract_check_names_every_unreadable_table_and_checks_the_others(tmp_path, capsys):
    (tmp_path / "contract.toml").write_text(CONTRACT)
    (tmp_path / "good.csv").write_text(liver_table(12))
    tables = [tmp_path / "gone-a.csv", tmp_path / "good.csv", tmp_path / "gone-b.csv"]
    assert cli_main(["contract", "check", str(tmp_path / "contract.toml"),
                     *map(str, tables)]) == 2
    printed = capsys.readouterr()
    assert f"data file {tables[0]} does not exist" in printed.err
    assert f"data file {tables[2]} does not exist" in printed.err
    assert f"{tables[1]}: 12 rows" in printed.out  # checked between the two


def test_text_in_a_numeric_column_is_counted_and_never_quoted():
    contract = parse_contract(tomllib.loads(CONTRACT), "liver.toml")
    table = {"bili": np.array([0.05, 1.0, np.nan, 5.0]),
             "age": np.array(["20", "senior", None, "elderly"], dtype=object),
             "sex": np.array(["f", "m", None, "m"], dtype=object),
             "smoker": np.array([0.0, 1.0, 1.0, 0.0]),
             "alb": np.array([1.0, 2.0, 3.0, 4.0])}
    found = contract.check(table)
    (problem,) = [p for p in found.problems if "'age'" in p]
    assert "2 of its 4 cells are not numbers" in problem
    assert "senior" not in problem and "elderly" not in problem


def test_simulate_tables_names_a_missing_tables_site_by_number_and_file(tmp_path, capsys):
    (tmp_path / "contract.toml").write_text(CONTRACT)
    (tmp_path / "a.csv").write_text(liver_table(40))
    assert cli_main(["simulate", "dpdis-pca", "--tables", str(tmp_path / "a.csv"),
                     str(tmp_path / "hospital-b.csv"), "--contract",
                     str(tmp_path / "contract.toml")]) == 2
    err = capsys.readouterr().err
    assert f"site 1 (hospital-b.csv): data file {tmp_path / 'hospital-b.csv'} does not " \
           "exist" in err
