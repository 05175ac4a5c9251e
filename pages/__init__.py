"""The dashboard's pages: one folder per page (the page and the panels only it uses), and
`ui/`, what several pages share.

No page file sits directly in pages/: Streamlit (1.67 too) keeps its legacy multipage
mode on in a process until `st.navigation` first runs (`PagesManager.uses_pages_directory`,
set when a pages/ folder is beside the main script), and in that mode it lists every
top-level `pages/*.py` as a page and runs the one a URL names without app.py, its router
or its sidebar. With the pages in folders that mode finds no page, so the first request
of a fresh server, whatever its URL, runs app.py, whose `st.navigation` ends the mode.
That first request still costs one thing when it names a page (/scaling, not the root):
the legacy mode tells the browser "Page not found" before app.py runs, and the dialog
shows over the right page. Only the first session after a start sees it; nothing in
app.py runs early enough to prevent it, and the folder keeps its name (docs/sharing.md).
"""
