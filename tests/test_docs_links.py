"""The documentation's relative links resolve: every target file exists, every `#anchor` names a heading.

Covers README.md, docs/*.md and suites/*/README.md. Anchors follow GitHub's rule for heading ids
(lower case; punctuation other than `-` and `_` dropped; spaces become `-`; a repeated heading gets
`-1`, `-2`, ...). Also keeps the README a front page: at most 150 lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 150

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or [text](target "title"); images ![alt](target) too. Not inside inline code.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "suites").glob("*/README.md"))]
    return [f for f in files if f.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading's text (the base, before `-1` suffixes for repeats)."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link in the file's prose."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if not SCHEME.match(target) and not target.startswith("//"):
                found.append((number, target))
    return found


def broken_links(path: Path) -> list[str]:
    problems: list[str] = []
    where = path.relative_to(REPO)
    for number, target in links(path):
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{where}:{number}: {target}: no such file")
            continue
        if fragment:
            if resolved.is_dir() or resolved.suffix != ".md":
                problems.append(f"{where}:{number}: {target}: an anchor into something not markdown")
            elif unquote(fragment).lower() not in anchors(resolved):
                problems.append(f"{where}:{number}: {target}: no heading with that anchor")
    return problems


def test_the_documentation_files_exist() -> None:
    names = {str(f.relative_to(REPO)) for f in doc_files()}
    for name in ("README.md", "docs/method.md", "docs/usage.md", "docs/extending.md"):
        assert name in names


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_readme_is_a_front_page() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_slugs_follow_githubs_rule() -> None:
    assert (
        slug("Plausibility: FLOP/s and bandwidth (`harness/peaks.py`)")
        == "plausibility-flops-and-bandwidth-harnesspeakspy"
    )
    assert (
        slug("Isolated stacks: Docker images, `docker compose up`") == "isolated-stacks-docker-images-docker-compose-up"
    )
    assert slug("The seeds — where **they** came from") == "the-seeds--where-they-came-from"
    assert slug("HARNESS_BACKEND and [links](x.md)") == "harness_backend-and-links"


def test_links_in_code_are_not_links(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n\n```\n[a](missing.md)\n# not a heading\n```\n`[b](gone.md)` [c](#title)\n")
    assert links(doc) == [(7, "#title")]
    assert anchors(doc) == {"title"}
