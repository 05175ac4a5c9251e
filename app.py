"""PLN JIT Lab: the router and the shared sidebar; every page lives in pages/."""

from core.runtime import native_settings

native_settings()  # before streamlit, numpy or jax load their native libraries

import streamlit as st  # noqa: E402

from pages.ui import access  # noqa: E402
from pages.ui.sidebar import sidebar  # noqa: E402

st.set_page_config(page_title="PLN JIT Lab", page_icon=":material/speed:", layout="wide")
access.gate()  # with a password configured, nothing below runs until it is given

navigation = st.navigation(
    [
        st.Page("pages/run.py", title="Run", icon=":material/play_arrow:", default=True),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page("pages/scaling.py", title="Scaling", icon=":material/trending_up:"),
        st.Page("pages/under_the_hood.py", title="Under the hood", icon=":material/memory:"),
        st.Page("pages/about.py", title="About", icon=":material/info:"),
    ]
)
sidebar()
navigation.run()
