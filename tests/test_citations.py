"""Citations (issue 63): the notebooks cite from one bibliography, notebooks/references.md, by key
(`[@lester2021]`). Checks that every key a notebook's markdown cites is in the bibliography, that every
entry there has authors, a year, a title and a venue, that every entry is cited somewhere, and that the
works the second reading found cited without venue or uncited are cited by key in their lessons. The
helpers are tested on made-up text too, so each check is seen to fail."""
import pathlib
import re

import nbformat
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
BIB = REPO / "notebooks" / "references.md"
KEY = re.compile(r"\[@([a-z][a-z0-9_-]*)\]")
# - [@key] Authors (year). *Title*. Venue.
ENTRY = re.compile(r"^- \[@(?P<key>[a-z][a-z0-9_-]*)\] (?P<authors>[^()]+?) \((?P<year>(?:19|20)\d\d)\)\. "
                   r"\*(?P<title>[^*]+)\*\. (?P<venue>.*?)\.?$")

# lesson folder prefix -> keys its markdown must cite (the works issue 63 found uncited or without venue)
REQUIRED = {
    "07": {"katharopoulos2020", "choromanski2021"},
    "09": {"lester2021", "allal2025", "brown2020"},
    "10": {"choromanski2021", "lin2023", "elnaggar2022"},
    "11": {"vaser2017"},
    "12": {"kelley2020", "rauluseviciute2024"},
}


def parse_bibliography(text: str) -> dict[str, dict[str, str]]:
    """key -> fields of each entry line; raises ValueError on an entry line that is not in the
    format or has an empty venue, and on a key listed twice."""
    entries: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.startswith("- [@"):
            continue
        m = ENTRY.match(line)
        if m is None:
            raise ValueError(f"not in the form '- [@key] Authors (year). *Title*. Venue.': {line!r}")
        if not m["venue"].strip():
            raise ValueError(f"entry {m['key']} names no venue: {line!r}")
        if m["key"] in entries:
            raise ValueError(f"key {m['key']} listed twice")
        entries[m["key"]] = m.groupdict()
    return entries


def cited_keys(nb: nbformat.NotebookNode) -> set[str]:
    return {k for c in nb.cells if c.cell_type == "markdown" for k in KEY.findall(c.source)}


def notebooks():
    return sorted((REPO / "notebooks").glob("[0-9][0-9]_*/*.ipynb"))


def test_the_bibliography_parses_and_every_entry_has_a_venue():
    entries = parse_bibliography(BIB.read_text(encoding="utf-8"))
    assert len(entries) >= 10, sorted(entries)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.parent.name)
def test_every_key_a_notebook_cites_is_in_the_bibliography(path):
    entries = parse_bibliography(BIB.read_text(encoding="utf-8"))
    missing = cited_keys(nbformat.read(path, as_version=4)) - set(entries)
    assert not missing, f"{path.parent.name} cites keys missing from notebooks/references.md: {sorted(missing)}"


def test_every_entry_is_cited_and_the_named_works_are_cited_where_used():
    entries = parse_bibliography(BIB.read_text(encoding="utf-8"))
    cited = {p.parent.name[:2]: cited_keys(nbformat.read(p, as_version=4)) for p in notebooks()}
    orphans = set(entries) - set().union(*cited.values())
    assert not orphans, f"entries no notebook cites: {sorted(orphans)}"
    for lesson, keys in REQUIRED.items():
        assert keys <= cited[lesson], f"lesson {lesson} does not cite {sorted(keys - cited[lesson])} by key"


def test_the_checks_fail_on_a_bad_entry_and_an_unknown_key():
    good = "- [@a2020] A, B. (2020). *Title*. Some Venue 1(2)."
    assert parse_bibliography(good)["a2020"]["venue"] == "Some Venue 1(2)"
    with pytest.raises(ValueError, match="no venue|not in the form"):
        parse_bibliography("- [@b2021] A, B. (2021). *Title*. ")
    with pytest.raises(ValueError, match="not in the form"):
        parse_bibliography("- [@c2021] A, B. 2021, Title, Venue")
    with pytest.raises(ValueError, match="twice"):
        parse_bibliography(good + "\n" + good)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("as shown (X 2020 [@nosuch2020])")])
    assert cited_keys(nb) - set(parse_bibliography(good)) == {"nosuch2020"}
