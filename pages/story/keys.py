"""Keyboard shortcuts for buttons: Streamlit has none, so a few lines of script click them.

`st.html` content is not in an iframe, so the script listens on the page itself; it
finds a button by the class Streamlit gives a keyed widget's container
(`st-key-<key>`), and leaves keys alone while the focus is in a field. Presenter clickers
send Page Up / Page Down, keyboards arrows: both can be bound. Nothing is fetched.
"""

from __future__ import annotations

import json

import streamlit as st

_SCRIPT = """
<script>
(() => {
  window.plnlabKeys = %s;
  if (window.plnlabKeysBound) return;  // once per page load: reruns redraw this element
  window.plnlabKeysBound = true;
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const target = event.target;
    if (target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))) return;
    const key = window.plnlabKeys[event.key];
    const button = key && document.querySelector(`.st-key-${key} button`);
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();
  });
})();
</script>
"""


def bind(shortcuts: dict[str, str]) -> None:
    """Clicks the button whose widget key is `shortcuts[key]` when `key` (a KeyboardEvent.key
    such as "ArrowRight") is pressed on this page."""
    st.html(_SCRIPT % json.dumps(shortcuts), unsafe_allow_javascript=True)
