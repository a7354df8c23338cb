"""MkDocs hook: show the library's reStructuredText-flavoured docstrings properly in the API reference.

- Cross-references in Sphinx's style (:func:`name`, :class:`~a.b.C`) render in Markdown as the role's text followed
  by code: the role is dropped and, as Sphinx does for a leading ``~``, only the name's last component is shown.
- Simple tables (columns under runs of ``=``) render as one paragraph: they become HTML tables.
"""

import html
import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):<code>(~?)([^<]*)</code>")
_RULE = r"={2,}(?: +={2,})+"
_TABLE = re.compile(rf"<p>({_RULE}\n.*?\n{_RULE})</p>", re.S)
_CODE = re.compile(r"``(.+?)``")


def _name(m: re.Match) -> str:
    tilde, name = m.group(1), m.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if tilde else name}</code>"


def _cell(text: str) -> str:
    return _CODE.sub(r"<code>\1</code>", html.escape(text, quote=False))


def _table(m: re.Match) -> str:
    """A simple table as HTML (the paragraph unchanged where it holds other markup than code)."""
    source = re.sub(r"<code>(.*?)</code>", r"``\1``", m.group(1))
    if "<" in source:
        return m.group(0)
    lines = html.unescape(source).split("\n")
    starts = [s.start() for s in re.finditer(r"=+", lines[0])]
    bounds = list(zip(starts, starts[1:] + [None]))
    rules = [i for i, line in enumerate(lines) if re.fullmatch(_RULE, line.strip())]
    if len(rules) < 2:
        return m.group(0)
    rows, head = [], rules[1] if len(rules) > 2 else 0
    for i, line in enumerate(lines):
        if i in rules:
            continue
        cells = [line[a:b].strip() for a, b in bounds]
        if rows and not cells[0] and (i > head or head == 0):
            rows[-1][1] = [f"{x} {y}".strip() for x, y in zip(rows[-1][1], cells)]  # a continuation line
        else:
            rows.append([i < head, cells])
    out = ["<table>"]
    for is_head, cells in rows:
        tag = "th" if is_head else "td"
        out.append("<tr>" + "".join(f"<{tag}>{_cell(c)}</{tag}>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def on_page_content(html_text, **kwargs):
    return _TABLE.sub(_table, _ROLE.sub(_name, html_text))
