"""The README is a quick start that links the topic pages; the links hold.

README.md keeps what a new user reads in five minutes (what fedpca is, the two commands and
their output, the three ways to run, what is guaranteed, where to go next); everything else
lives in a page under ``docs/`` (or ``deploy/README.md``) that the README links.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The README's length, at most: a quick start, not a manual.
MOST_LINES = 160
#: Every page a reader must be able to reach from the README.
PAGES = ("docs/privacy.md", "docs/secure_aggregation.md", "docs/algorithms.md",
         "docs/tables.md", "docs/running.md", "docs/api.md", "docs/layout.md",
         "docs/exact_noise.md", "deploy/README.md", "benchmarks/README.md",
         "docs/which_algorithm.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    """The local targets of the Markdown links and images of ``page``."""
    return [t for t in LINK.findall(page.read_text()) if not t.startswith(("http:", "https:"))]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of ``page``'s headers."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def test_the_readme_is_a_quick_start_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= MOST_LINES
    assert 'pip install -e ".[simulation]" && fedpca simulate dps-pca --seed 1' in text
    assert 'pip install -e ".[test]" && python -m pytest -q' in text
    for section in ("## Three ways to run", "## What is guaranteed, to whom",
                    "## Where to go next"):
        assert section in text


def test_every_topic_page_is_linked_from_the_readme():
    linked = set(links(README))
    assert set(PAGES) <= linked, sorted(set(PAGES) - linked)


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md")),
                                  ROOT / "deploy" / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_local_link_and_anchor_resolves(page):
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no #{anchor} in {resolved.name}"
