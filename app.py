"""PLN JIT Lab: the router and the shared sidebar; every page lives in pages/."""

import streamlit as st

from core.runtime import quiet_xla_logs

quiet_xla_logs()  # before any page imports jax

from pages import shared  # noqa: E402

st.set_page_config(page_title="PLN JIT Lab", page_icon=":material/speed:", layout="wide")

navigation = st.navigation(
    [
        st.Page("pages/run.py", title="Run", icon=":material/play_arrow:", default=True),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page("pages/scaling.py", title="Scaling", icon=":material/trending_up:"),
        st.Page("pages/under_the_hood.py", title="Under the hood", icon=":material/memory:"),
        st.Page("pages/about.py", title="About", icon=":material/info:"),
    ]
)
shared.sidebar()
navigation.run()
