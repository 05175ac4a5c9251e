"""Where the project is, for tests that start `python -m core`, Streamlit or a worker script."""

import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
APP = os.path.join(ROOT, "app.py")
