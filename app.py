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
    resources.unknown_settings_told()  # once a process, in the server's log, password or not: an operator's typo

    # Page files sit in folders of their own (see pages/__init__.py), so each names its URL.
    # The default page is served at the root whatever its url_path, and that path then
    # answers "page not found": Run reserves one nobody types, and "run" is an alias below.
    run = st.Page("pages/run/page.py", title="Run", icon=":material/play_arrow:", url_path="run_page",
                  default=True)
    under_the_hood = st.Page("pages/under_the_hood/page.py", title="Under the hood", icon=":material/memory:",
                             url_path="under_the_hood")
    pages = [
        run,
        st.Page("pages/story/page.py", title="Story", icon=":material/slideshow:", url_path="story"),
        st.Page("pages/compare/page.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
        st.Page("pages/scaling/page.py", title="Scaling", icon=":material/trending_up:", url_path="scaling"),
        under_the_hood,
        st.Page("pages/about/page.py", title="About", icon=":material/info:", url_path="about"),
    ]
    # Addresses people type or say aloud in a talk, each sent on to its page with the link's
    # settings; the menu's names as it spells them too (/Story opened Run behind "page not found").
    spoken = [("run", run), ("home", run), ("under-the-hood", under_the_hood), ("hood", under_the_hood),
              ("help", pages[-1])]
    named = [(page.url_path, page) for page in pages[1:]]
    aliases = [_alias(st, path, target) for path, target in
               spoken + [(path.capitalize(), target) for path, target in spoken + named]]
    # The pages before the gate, their menu hidden until it lets the session through: with the
    # gate first, a link (/story?step=5) and a reload both ended on Run after the password,
    # the page and its settings lost.
    navigation = st.navigation(pages + aliases, position="sidebar" if sign_in.admitted() else "hidden")
    sign_in.gate()  # with a password configured, nothing below runs until it is given
    resources.cluster_or_stop()  # the workers start with the first page, before anyone clicks Run
    refused = links.restore()  # a link's settings, before any widget is drawn
    if refused:
        st.toast(links.refused_note(refused), icon=":material/link_off:", duration="long")  # a sentence to read
    sidebar(navigation.url_path or "run")
    links.publish(navigation.url_path or "run")
    navigation.run()
    # Again after the page: what the page itself settled (a baseline chosen anew for new
    # runs, a stale choice dropped) would otherwise reach the address only at the next rerun,
    # and a link copied before it would open another view. (A page that stops early keeps
    # the address written above.)
    links.publish(navigation.url_path or "run")


def _alias(st, path: str, target):
    """A page left out of the menu, at `path`, that opens `target` with the address's parameters."""
    def go() -> None:
        st.switch_page(target, query_params=st.query_params.to_dict())

    return st.Page(go, title=target.title, url_path=path, visibility="hidden")


if __name__ == "__main__":
    main()
