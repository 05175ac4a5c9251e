"""PLN JIT Lab: the router and the shared sidebar; every page lives in pages/.

Streamlit runs this file as `__main__` on every rerun. The cluster's worker processes are
spawned, and a spawned process imports its parent's main script as `__mp_main__`: so
nothing here runs unless this is `__main__` (a worker must not draw a page).
"""


def main() -> None:
    from core.machine.host import native_settings

    native_settings()  # before streamlit, numpy or pandas load their native libraries

    import streamlit as st

    from pages.ui import links, projector, resources, sign_in
    from pages.ui.sidebar import sidebar

    # A local icon: a Material one would be fetched from Google's servers by every browser.
    st.set_page_config(page_title="PLN JIT Lab", page_icon=str(projector.ICON), layout="wide")
    projector.set_up()
    sign_in.gate()  # with a password configured, nothing below runs until it is given
    resources.cluster_or_stop()  # the workers start with the first page, before anyone clicks Run

    # Page files sit in folders of their own (see pages/__init__.py), so each names its URL.
    navigation = st.navigation(
        [
            st.Page("pages/run/page.py", title="Run", icon=":material/play_arrow:", url_path="run", default=True),
            st.Page("pages/story/page.py", title="Story", icon=":material/slideshow:", url_path="story"),
            st.Page("pages/compare/page.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
            st.Page("pages/scaling/page.py", title="Scaling", icon=":material/trending_up:", url_path="scaling"),
            st.Page("pages/under_the_hood/page.py", title="Under the hood", icon=":material/memory:",
                    url_path="under_the_hood"),
            st.Page("pages/about/page.py", title="About", icon=":material/info:", url_path="about"),
        ]
    )
    links.restore()  # a link's settings, before any widget is drawn
    sidebar()
    links.publish(navigation.url_path or "run")
    navigation.run()


if __name__ == "__main__":
    main()
