"""A page's main content as Markdown, boilerplate removed (trafilatura), split into sections by heading.

Pure functions on plain values: `article_from_html` runs in a worker thread (runtime.spiders.article), never on the
reactor, because trafilatura takes about 1.5 s per MB of an ordinary page's HTML, and up to 18 s per MB of a
hostile one (150,000 empty spans; 40,000 headings).

Sections are keyed by their heading's text, so the same page crawled again gives the same keys and a change of one
section changes one key's value (items' field history tracks dict fields one level deep). Text before the first
heading is the section `LEAD`; a heading seen again gets a counter (`Notes`, `Notes (2)`); at most MAX_SECTIONS.
"""

from __future__ import annotations

import re
from typing import Any

LEAD = "(lead)"
MAX_SECTIONS = 200
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
EMPHASIS = re.compile(r"[*_`]+")
# trafilatura's metadata header (with_metadata=True): YAML between two `---` lines, values on one line each.
HEADER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


def article_from_html(html: str, *, url: str, markdown_max: int) -> dict[str, Any]:
    """`title`, `published` (ISO date or None), `markdown` (at most `markdown_max` UTF-8 bytes: whole sections while
    they fit; `_truncated` says when some were left out) and `sections`. Empty markdown when no main text is found."""
    import trafilatura  # imported by the first article extracted, not by every crawl process (a few MiB)

    document = trafilatura.extract_with_metadata(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        include_comments=False,
        include_images=False,
    )
    if document is None:
        return {"title": None, "published": None, "markdown": "", "sections": {}}
    sections = markdown_sections(HEADER.sub("", document.text or "", count=1).strip())
    kept, truncated = sections_within(sections, markdown_max)
    article = {
        "title": document.title or None,
        "published": document.date or None,
        "markdown": "\n\n".join(kept.values()),
        "sections": kept,
    }
    if truncated:
        article["_truncated"] = True
    return article


def markdown_sections(markdown: str) -> dict[str, str]:
    """{heading text: the section's Markdown, its heading line included}, in page order. After MAX_SECTIONS, further
    headings stay in the last section: a page of 40,000 headings is not 40,000 fields."""
    sections: dict[str, str] = {}
    counts: dict[str, int] = {}
    used = {LEAD}
    key, lines, in_fence = LEAD, [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else HEADING.match(line)
        if heading and len(sections) + any(text.strip() for text in lines) < MAX_SECTIONS:
            _keep(sections, key, lines)
            key, lines = _unique(heading_text(heading.group(2)), counts, used), []
        lines.append(line)
    _keep(sections, key, lines)
    return sections


def heading_text(raw: str) -> str:
    """A heading as a reader sees it: link targets and emphasis marks dropped, spaces collapsed."""
    return " ".join(EMPHASIS.sub("", LINK.sub(r"\1", raw)).split()) or "(untitled)"


def sections_within(sections: dict[str, str], limit: int) -> tuple[dict[str, str], bool]:
    """The leading sections whose Markdown fits `limit` UTF-8 bytes (a first section alone too big: cut at a line)."""
    kept: dict[str, str] = {}
    used = 0
    for key, text in sections.items():
        size = len(text.encode()) + (2 if kept else 0)
        if used + size > limit:
            if not kept:
                kept[key] = _cut_at_line(text, limit)
            return kept, True
        kept[key], used = text, used + size
    return kept, False


def _keep(sections: dict[str, str], key: str, lines: list[str]) -> None:
    text = "\n".join(lines).strip()
    if text:
        sections[key] = text


def _unique(text: str, counts: dict[str, int], used: set[str]) -> str:
    """`text`, or `text (N)` with the first N not used yet (counted on per text: no rescan from 2)."""
    key = text
    while key in used:
        counts[text] = counts.get(text, 1) + 1
        key = f"{text} ({counts[text]})"
    used.add(key)
    return key


def _cut_at_line(text: str, limit: int) -> str:
    cut = text.encode()[:limit].decode(errors="ignore")
    return cut.rsplit("\n", 1)[0] if "\n" in cut else cut
