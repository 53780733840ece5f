"""Every comment that cites the design or a research file points at a section that exists in this repository.

Comments cite `docs/DESIGN.md §6` or `docs/research/kafka.md §2.13` (docs/DESIGN.md §11): a clone must be able to
follow each citation. A section is a heading numbered `2.13` (or `2.` for `§2`); in a research file whose top
section is a numbered list (docs/research/spark.md §0), `§0.4` is item 4 of that list.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("quorum", "zkemu", "broker", "client", "runtime", "spark_connector", "zkraft", "tests", "bench")

# `docs/research/kafka.md §3.8`, `... §5.2-5.3`, `... §2.5 and §2.6`, `... §1, §6.1`; a line break may split them.
_CITATION = re.compile(
    r"docs/((?:research/)?[A-Za-z]+\.md)\s+((?:§[0-9][0-9.]*(?:-[0-9][0-9.]*)?(?:,\s*|\s+and\s+)?)+)",
)
_SECTION = re.compile(r"§([0-9][0-9.]*)(?:-([0-9][0-9.]*))?")
# A citation without the docs/ folder a clone has (the old form of the research and design citations).
_BARE = re.compile(r"(?<![/\w])(?:research/[a-z]+\.md|DESIGN\.md)")


def _sections(doc: str) -> set[str]:
    """The section numbers a document defines: numbered headings, and list items under a numbered heading."""
    found: set[str] = set()
    current: str | None = None
    for line in doc.splitlines():
        heading = re.match(r"#+\s+([0-9][0-9.]*?)\.?\s", line)
        if heading:
            current = heading.group(1)
            found.add(current)
            continue
        item = re.match(r"([0-9]+)\.\s", line)
        if item and current is not None and "." not in current:
            found.add(f"{current}.{item.group(1)}")
    return found


def _source_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "bench" / "README.md"]
    for folder in SOURCE_DIRS:
        files.extend(sorted((ROOT / folder).rglob("*.py")))
    files.extend(sorted((ROOT / "docs").rglob("*.md")))
    return [path for path in files if path.is_file()]


def _citations() -> list[tuple[str, str, str]]:
    """(where, cited document, section) for every section citation in the sources."""
    found = []
    for path in _source_files():
        text = path.read_text(encoding="utf-8")
        for match in _CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            for section in _SECTION.finditer(match.group(2)):
                for number in section.groups():
                    if number:
                        found.append((where, match.group(1), number.rstrip(".")))
    return found


def test_every_cited_section_exists() -> None:
    cache: dict[str, set[str]] = {}
    missing = []
    citations = _citations()
    for where, document, number in citations:
        if document not in cache:
            target = ROOT / "docs" / document
            cache[document] = _sections(target.read_text(encoding="utf-8")) if target.is_file() else set()
        if number not in cache[document]:
            missing.append(f"{where}: docs/{document} §{number}")
    assert len(citations) > 80, "the citation pattern no longer matches the comments"
    assert not missing, "cited sections that do not exist:\n" + "\n".join(missing)


def test_no_citation_points_outside_the_repository() -> None:
    bare = []
    for path in _source_files():
        if path.is_relative_to(ROOT / "docs" / "research"):
            continue  # the research files quote other projects' docs by their own paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if _BARE.search(line):
                bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "citations without docs/ (a clone has no such file):\n" + "\n".join(bare)
