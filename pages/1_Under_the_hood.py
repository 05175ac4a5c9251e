"""/Under_the_hood, opened by a fresh server's first session: see pages/__init__.py."""
from app import main

main()
