"""What every page shares, one concept per module.

A subpackage, not files beside the pages: Streamlit's legacy multipage mode lists every
top-level `pages/*.py` as a page (see `routing.ensure_router`), but not files in subfolders.
"""
