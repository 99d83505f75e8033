"""The documentation's links resolve, and the README stays short and links every docs page.

For README.md, launch/README.md and every docs/*.md: each Markdown link `[text](target)` outside
fenced code blocks and inline code (web and mail links aside) must name a file or directory that
exists, relative to the linking page, and a `#anchor` (on the same page or `page.md#anchor`)
must be one that GitHub makes for a heading of the target page. Plain text only: nothing here
imports JAX.
"""

from __future__ import annotations

import collections
import glob
import os
import re
from typing import NamedTuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
PAGES = sorted([README, os.path.join(REPO, "launch", "README.md"),
                *glob.glob(os.path.join(REPO, "docs", "*.md"))])
# One page per topic (issue 33): each must exist and be linked from the README.
TOPIC_PAGES = ("docs/README.md", "docs/pretraining.md", "docs/tokenizers.md",
               "docs/objectives.md", "docs/experiments.md", "docs/finetuning.md",
               "docs/question-answering.md", "docs/scoring.md", "docs/conversion.md",
               "docs/parallelism.md", "docs/benchmarks.md", "docs/architecture.md",
               "docs/FIDELITY.md", "docs/RESULTS.md", "docs/PERFORMANCE.md", "docs/TPU.md")
README_MAX_LINES = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
# `[text](target)` or `[text](target "title")`; text may hold one level of brackets
# (`[`[x]`](y)`); the target may be wrapped in <...>.
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                  r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.DOTALL)


class Link(NamedTuple):
  page: str  # Path relative to the repository, e.g. "docs/scoring.md".
  line: int
  text: str
  target: str

  def __str__(self):
    return f"{self.page}:{self.line}: [{self.text}]({self.target})"


def _rel(path: str) -> str:
  return os.path.relpath(path, REPO)


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def prose_lines(text: str):
  """(line number, line) of the lines outside fenced code blocks."""
  fence = None
  for number, line in enumerate(text.split("\n"), 1):
    match = FENCE.match(line)
    if fence is None:
      if match:
        fence = match.group(1)
        continue
      yield number, line
    elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
        and not line.strip()[len(match.group(1)):].strip():
      fence = None


def _blank_inline_code(text: str) -> str:
  """The text with inline code spans (which may run over lines, not paragraphs) replaced by
  spaces: a link inside one is not a link."""
  return INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def links(path: str) -> list[Link]:
  """Every link of a page outside code; a link's text may run over lines."""
  lines = _read(path).split("\n")
  prose = dict(prose_lines("\n".join(lines)))
  text = "\n".join(prose.get(number, "") for number in range(1, len(lines) + 1))
  found = []
  for match in LINK.finditer(_blank_inline_code(text)):
    number = text.count("\n", 0, match.start()) + 1
    # The text as written (inline code in it was blanked only to find the link).
    found.append(Link(_rel(path), number, text[match.start(1):match.end(1)],
                      match.group(2).strip("<>")))
  return found


def github_anchor(heading: str) -> str:
  """The anchor GitHub makes for a heading's text, before any -1, -2 suffix."""
  text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # Links and images: their text.
  text = re.sub(r"<[^>]+>", "", text)  # HTML tags.
  text = text.strip().lower()
  text = re.sub(r"[^\w\- ]", "", text)  # Punctuation (backquotes, dots, colons...) goes.
  return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
  """Every anchor of a page's headings, with GitHub's -1, -2 suffixes for repeats."""
  seen, out = collections.Counter(), set()
  for _, line in prose_lines(_read(path)):
    match = HEADING.match(line)
    if not match:
      continue
    anchor = github_anchor(match.group(2))
    out.add(anchor if not seen[anchor] else f"{anchor}-{seen[anchor]}")
    seen[anchor] += 1
  return out


def _external(target: str) -> bool:
  return re.match(r"^(https?:|mailto:|ftp:)", target, re.IGNORECASE) is not None


ALL_LINKS = [link for page in PAGES for link in links(page)]


def problem(link: Link) -> str:
  """"" when the link resolves, else what is wrong with it."""
  if _external(link.target):
    return ""
  if not link.target:
    return "empty target"
  path_part, _, anchor = link.target.partition("#")
  page = os.path.join(REPO, link.page)
  if path_part:
    if path_part.startswith("/"):
      return "absolute path: write it relative to the page"
    resolved = os.path.normpath(os.path.join(os.path.dirname(page), path_part))
    if not resolved.startswith(REPO + os.sep) and resolved != REPO:
      return f"{path_part} points outside the repository"
    if not os.path.exists(resolved):
      return f"{_rel(resolved)} does not exist"
  else:
    resolved = page
  if anchor:
    if not resolved.endswith(".md") or os.path.isdir(resolved):
      return f"#{anchor} on {_rel(resolved)}, which is not a Markdown page"
    known = anchors(resolved)
    if anchor not in known:
      close = sorted(a for a in known if anchor[:8] in a or a[:8] in anchor)[:5]
      hint = f" (close: {', '.join('#' + a for a in close)})" if close else ""
      return f"no heading of {_rel(resolved)} has the anchor #{anchor}{hint}"
  return ""


def test_the_pages_are_found_and_have_links():
  assert README in PAGES and len(PAGES) >= len(TOPIC_PAGES) + 1
  assert sum(1 for link in ALL_LINKS if link.page == "README.md") >= len(TOPIC_PAGES)


@pytest.mark.parametrize("page", [_rel(p) for p in PAGES])
def test_every_relative_link_resolves(page):
  bad = [f"{link}: {problem(link)}" for link in ALL_LINKS
         if link.page == page and problem(link)]
  assert not bad, f"{len(bad)} broken link(s) in {page}:\n" + "\n".join(bad)


def test_readme_is_short():
  lines = _read(README).count("\n")
  assert lines <= README_MAX_LINES, (
      f"README.md has {lines} lines, more than {README_MAX_LINES}: move detail to a docs/ page")


@pytest.mark.parametrize("page", TOPIC_PAGES)
def test_every_docs_page_exists_and_the_readme_links_it(page):
  assert os.path.isfile(os.path.join(REPO, page)), f"{page} does not exist"
  linked = {os.path.normpath(link.target.partition("#")[0])
            for link in ALL_LINKS if link.page == "README.md" and not _external(link.target)}
  assert os.path.normpath(page) in linked, f"README.md has no link to {page}"


@pytest.mark.parametrize("page", [p for p in TOPIC_PAGES if p != "docs/README.md"
                                  and os.path.basename(p).islower()])
def test_every_topic_page_links_back_to_the_readme_or_the_docs_index(page):
  path = os.path.join(REPO, page)
  num_lines = _read(path).rstrip("\n").count("\n") + 1
  back = [link for link in links(path)
          if os.path.normpath(link.target.partition("#")[0]) in ("../README.md", "README.md")
          and (link.line <= 5 or link.line > num_lines - 5)]
  assert back, f"{page} has no link to ../README.md or README.md in its first or last 5 lines"


# The rules themselves, on made-up text.


def test_github_anchor_rules():
  assert github_anchor("Fine-tuning on SQuAD 1.1 and 2.0") == "fine-tuning-on-squad-11-and-20"
  assert github_anchor("Sizing a run for a TPU slice, without a TPU") == \
      "sizing-a-run-for-a-tpu-slice-without-a-tpu"
  assert github_anchor("Where the CPU step goes: `--profile`") == "where-the-cpu-step-goes---profile"
  assert github_anchor("Electric (`objective.name=electric`)") == "electric-objectivenameelectric"
  assert github_anchor("snake_case stays") == "snake_case-stays"


def test_duplicate_headings_get_suffixes_and_fenced_headings_do_not_count(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("# Notes\n\n## Notes\n\n```bash\n# Notes\n## Hidden\n```\n\n### Notes\n",
                  encoding="utf-8")
  assert anchors(str(page)) == {"notes", "notes-1", "notes-2"}


def test_links_in_code_are_not_links(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("See [a](a.md) and `[b](b.md)`.\n\n```\n[c](c.md)\n```\n"
                  "[`d.py`](d.py) and [e](e.md#x \"title\") and [f\ng](g.md)\n",
                  encoding="utf-8")
  assert [(l.line, l.text, l.target) for l in links(str(page))] == [
      (1, "a", "a.md"), (6, "`d.py`", "d.py"), (6, "e", "e.md#x"), (6, "f\ng", "g.md")]
