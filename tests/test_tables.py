"""A site's tables read by pyarrow (fedpca.data.tables), and the public clinical tables split
over sites (``fedpca data split``) read back and validated by the contracts fedpca ships."""

import gzip
import re

import numpy as np
import pyarrow as pa
import pytest

from fedpca.cli import main as cli_main
from fedpca.data.clinical import shipped_contract
from fedpca.data.contract import load_contract
from fedpca.data.files import load_site_file
from fedpca.data.tables import matrix_width, read_table, write_table
from fedpca.errors import InvalidDataError

ROWS = pa.table({"age": [31, None, 70], "sex": ["f", "m", None], "crp": [0.5, 2.0, None]})


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_is_read_by_name_with_its_blanks(tmp_path, suffix):
    path = write_table(ROWS.select(["sex", "crp", "age"]), tmp_path / f"site{suffix}")
    table = read_table(path)
    assert list(table) == ["sex", "crp", "age"]  # the file's order; a contract matches names
    np.testing.assert_array_equal(table["age"], [31.0, np.nan, 70.0])
    assert table["age"].dtype == np.float64 and table["crp"].dtype == np.float64
    assert table["sex"].tolist() == ["f", "m", None]


def test_csv_blanks_and_null_markers_are_blanks_and_gzip_is_read(tmp_path):
    path = tmp_path / "site.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("b,a\nx,1\n,NA\ny,\n")
    table = read_table(path)
    assert table["b"].tolist() == ["x", None, "y"]
    np.testing.assert_array_equal(table["a"], [1.0, np.nan, np.nan])


@pytest.mark.parametrize("content,problem", [
    (b"a,b,c\n1,2,3\n4,Smith\n", "a row has 2 cells where the header has 3"),
    (b"a,a\n1,2\n", r"has columns \['a'\] more than once in its header"),
])
def test_an_unreadable_table_is_described_without_its_cells(tmp_path, content, problem):
    (tmp_path / "site.csv").write_bytes(content)
    with pytest.raises(InvalidDataError, match=problem) as error:
        read_table(tmp_path / "site.csv", site="clinic")
    assert "Smith" not in str(error.value) and str(error.value).startswith("clinic: ")


def test_a_matrix_file_may_have_a_header_or_none_and_be_parquet(tmp_path):
    records = np.array([[0.5, -1.0], [2.0, 3.25]])
    (tmp_path / "plain.csv").write_text("0.5,-1\n2,3.25\n")
    (tmp_path / "header.csv").write_text("a,b\n0.5,-1\n2,3.25\n")
    write_table(pa.table({"a": records[:, 0], "b": records[:, 1]}), tmp_path / "t.parquet")
    for name in ("plain.csv", "header.csv", "t.parquet"):
        np.testing.assert_array_equal(load_site_file(tmp_path / name), records)
    (tmp_path / "text.csv").write_text("age,name\n31,Smith\n")
    with pytest.raises(InvalidDataError, match="column 2 holds text, not numbers; .*data "
                                               "contract") as error:
        load_site_file(tmp_path / "text.csv")
    assert "Smith" not in str(error.value)


def test_a_matrix_files_width_is_read_from_its_head_alone(tmp_path):
    records = np.array([[0.5, -1.0, 2.0], [2.0, 3.25, 4.0]])
    (tmp_path / "plain.csv").write_text("0.5,-1,2\n2,3.25,4\n")
    (tmp_path / "header.csv").write_text("a,b,c\n0.5,-1,2\n2,3.25,4\n")
    with gzip.open(tmp_path / "zipped.csv.gz", "wt") as handle:
        handle.write("0.5,-1,2\n2,3.25,4\n")
    write_table(pa.table({k: records[:, j] for j, k in enumerate("abc")}), tmp_path / "t.parquet")
    np.save(tmp_path / "m.npy", records)
    for name in ("plain.csv", "header.csv", "zipped.csv.gz", "t.parquet", "m.npy"):
        assert matrix_width(tmp_path / name) == load_site_file(tmp_path / name).shape[1] == 3
    np.save(tmp_path / "vector.npy", records[0])
    (tmp_path / "empty.csv").write_text("")
    for name in ("vector.npy", "empty.csv", "missing.npy"):
        with pytest.raises(InvalidDataError, match="is not a matrix|does not exist"):
            matrix_width(tmp_path / name)


@pytest.mark.parametrize("name,sites,file_format,rows,columns,blanks", [
    ("flchain", 3, "csv", 7874, 11, {"creatinine": 1350}),
    ("rotterdam", 4, "parquet", 2982, 16, {}),
])
def test_a_split_clinical_table_round_trips_and_meets_its_shipped_contract(
        tmp_path, capsys, name, sites, file_format, rows, columns, blanks):
    assert cli_main(["data", "split", name, "--sites", str(sites), "--format", file_format,
                     "--out", str(tmp_path)]) == 0
    files = sorted(tmp_path.glob(f"{name}-*.{file_format}"))
    assert len(files) == sites and f"wrote {files[0]}" in capsys.readouterr().out
    contract = load_contract(tmp_path / f"{name}.toml")
    assert contract == load_contract(shipped_contract(name))
    tables = [read_table(path) for path in files]
    assert sum(len(t["age"]) for t in tables) == rows
    assert {c: sum(int(np.isnan(t[c]).sum()) for t in tables) for c in blanks} == blanks
    assert not {"rownames", "pid", "chapter"} & set(tables[0])  # identifiers, cause of death
    for table in tables:
        assert contract.check(table).ok
        matrix, names = contract.preprocess(table)
        assert matrix.shape == (len(table["age"]), columns) and names == contract.output_columns
        assert (matrix >= 0).all() and (matrix <= contract.widths).all()
    assert cli_main(["contract", "check", str(tmp_path / f"{name}.toml"),
                     *map(str, files)]) == 0


@pytest.mark.parametrize("separator, named", [(";", "semicolon"), ("\t", "tab"), ("|", "vertical bar")])
def test_a_csv_with_another_delimiter_gets_a_hint_naming_it(tmp_path, capsys, separator, named):
    lines = [separator.join(["age", "name", "crp"]), separator.join(["31", "Smith", "0,5"])]
    path = tmp_path / "site.csv"
    path.write_text("\n".join(lines) + "\n")
    for read in (read_table, load_site_file):
        with pytest.raises(InvalidDataError, match=rf"clinic: {path} reads as one column: its "
                                                   rf"header holds 2 {named}\(s\) .* seems "
                                                   rf"separated by {re.escape(repr(separator))}") as error:
            read(path, site="clinic")
        assert "Smith" not in str(error.value) and "age" not in str(error.value)
    (tmp_path / "contract.toml").write_text(
        '[contract]\nname = "c"\n[[column]]\nname = "age"\nkind = "numeric"\nrange = [0, 1]\n')
    assert cli_main(["contract", "check", str(tmp_path / "contract.toml"), str(path)]) == 2
    assert f"separated by {separator!r}" in capsys.readouterr().err


def test_a_one_column_csv_without_another_delimiter_is_read(tmp_path):
    (tmp_path / "site.csv").write_text("age\n31\n70\n")
    np.testing.assert_array_equal(read_table(tmp_path / "site.csv")["age"], [31.0, 70.0])
