"""The dashboard's pages: one folder per page (the page and the panels only it uses), and
`ui/`, what several pages share.

The `0_*.py` files beside the folders are for a fresh server's first session alone. Streamlit
(1.67 too) keeps its legacy multipage mode on in a process until `st.navigation` first runs
(`PagesManager.uses_pages_directory`, set when a pages/ folder is beside the main script). In
that mode it routes the first request itself, by the names of the top-level `pages/*.py` (a
leading number dropped), and tells the browser "Page not found" for any other address before
app.py has said what its pages are: a link to /story?step=3, the first thing opened after a
restart, showed that dialog over the right page. So each address app.py serves (its pages'
own paths and the spoken aliases, in lower case and as the menu spells them: `0_story.py`,
`1_Story.py`, numbered apart so that a disk that ignores case keeps both) has a file here that
runs app.py's `main`: the
legacy mode finds the address, runs it, and `main`'s `st.navigation` ends the mode for the
process and opens the address's page with the link's settings, as app.py does for every
later request. No page's code sits directly in pages/: the legacy mode would run it without
app.py, its router, its sidebar or its password.
"""
