"""Text from users and from the store, shown as text: never as markup, never with a server path.

Most Streamlit elements that show text (`st.markdown`, `st.error`, `st.caption`, progress
and status labels, toasts) render GitHub-flavoured markdown with Streamlit's extensions, so
an error message, a dataset or file name, a CSV header or anything an import brought in
could otherwise show a live link, an image fetched from elsewhere, a heading or coloured
text to everyone who opens the page. `md` escapes every character that starts markup;
`public` also drops the folders of any absolute path (a temp folder, the store's location),
which are nobody's business but the server's.
"""

from __future__ import annotations

import os
import re

# CommonMark lets any ASCII punctuation be escaped with a backslash; these start markup:
# emphasis, code, links and images, HTML and autolinks, headings (ATX and setext's === and
# ---), lists (-, +, 1.), thematic breaks, tables, strikethrough, maths, Streamlit's
# :directives[...] and :icons:, and entities.
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~$:&@!{}=+-])")
# A number then . or ) starts an ordered list at the start of a line.
_ORDERED = re.compile(r"(?m)^(\s*\d+)([.)])")
# A line break starts a new block (a setext heading's underline, an indented code block):
# shown text is one line.
_LINE_BREAKS = re.compile(r"[\r\n]+")
# GFM also links bare addresses ("https://...", "www.", "name@host"), and it finds them in
# the text after escapes are undone: an invisible word joiner breaks each pattern (and,
# unlike a zero-width space, never a line).
_BARE_LINK = re.compile(r"(?i)(://|\bwww\.|@)")
_BREAK = "\u2060"
# An absolute path: a slash that starts a word (not the middle of a/b or of a URL's //).
_PATH = re.compile(r"(?<![\w.:/\\~-])/(?:[^\s/'\"`,;()\[\]<>]+/)+([^\s/'\"`,;()\[\]<>]*)")


def md(value: object) -> str:
    """`value` as text that markdown shows literally, on one line (line breaks become
    spaces), character for character (bare web and mail addresses hold an invisible word
    joiner, so that none becomes a link)."""
    one_line = _LINE_BREAKS.sub(" ", str(value))
    unlinked = _BARE_LINK.sub(lambda found: found.group(1)[0] + _BREAK + found.group(1)[1:], one_line)
    return _ORDERED.sub(r"\1\\\2", _MARKUP.sub(r"\\\1", unlinked))


def without_paths(message: object) -> str:
    """`message` with each absolute path cut to its last part ("/tmp/x/runs.json" -> "runs.json")."""
    return _PATH.sub(lambda found: found.group(1) or os.sep, str(message))


def public(message: object) -> str:
    """An error message fit to show to every user: no server paths, no markup."""
    return md(without_paths(message))


def plain(markdown: str) -> str:
    """What `md` escaped, unescaped: the text a reader sees, without the word joiners
    (for tests and logs)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(_BREAK, "")
