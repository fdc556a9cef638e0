"""A griffe extension for the API reference: two docstring habits of east_hf rendered as Markdown.

- Doctests. east_hf's docstrings carry runnable doctests (pytest runs them with ``--doctest-modules``) outside any
  "Examples:" section. Markdown would read their ``>>>`` as nested block quotes and their output lines
  (``[0.2, 0.1]``) as link references, so every such block is wrapped in a ``pycon`` code fence.
- Field groups. A config's class docstring groups its fields under headers such as "Parameters that control the
  surrogate:" followed by indented ``name (type, defaults to ...): text`` entries (the house style, after trl's
  configs). Google-style parsing knows no such section, so each group becomes a bold header and a bullet list.

The source files are not changed.
"""

from __future__ import annotations

import re

import griffe


def fence_doctests(text: str) -> str:
    """Wrap each run of lines that starts with ``>>>`` (up to the next blank line) in a ``pycon`` fence."""
    out: list[str] = []
    in_fence = in_doctest = False
    indent = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if in_doctest:
            if stripped:
                out.append(line)
                continue
            out.append(f"{indent}```")
            in_doctest = False
        if stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            in_doctest = True
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


GROUP_HEADER = re.compile(r"^Parameters that control .*:$")
ENTRY_NAME = re.compile(r"^([a-z_][a-z0-9_]*)\b")


def list_field_groups(text: str) -> str:
    """Turn each "Parameters that control ...:" group of indented entries into a bold header and a bullet list."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not GROUP_HEADER.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        out += ["", f"**{lines[i][:-1]}**", ""]
        i += 1
        base = len(lines[i]) - len(lines[i].lstrip()) if i < len(lines) else 0
        while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) >= base > 0:
            line = lines[i]
            indent = len(line) - len(line.lstrip())
            body = line.strip()
            if indent == base:  # a new entry: its field name as code
                out.append("- " + ENTRY_NAME.sub(r"`\1`", body, count=1))
            else:  # a continuation line of the entry
                out.append("  " + body)
            i += 1
        out.append("")
    return "\n".join(out)


class EastDocstrings(griffe.Extension):
    """Fence the doctests and list the field groups of every object's docstring when griffe loads it."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None:
            return
        if ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
        if "Parameters that control " in obj.docstring.value:
            obj.docstring.value = list_field_groups(obj.docstring.value)
