"""The explaining pages (Under the hood, About) run in the real app without exceptions."""

import os

import pytest
from streamlit.testing.v1 import AppTest

APP = os.path.join(os.path.dirname(__file__), os.pardir, "app.py")


@pytest.fixture
def app(tmp_path, monkeypatch, routed_like_the_server):
    monkeypatch.setenv("PLNLAB_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("PLNLAB_JAX_CACHE", str(tmp_path / "jax-cache"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def tiny_problem(app) -> None:
    """The sidebar's settings for a simulated 30 x 4 fit of 3 iterations.

    Set through session state; the sidebar, drawn on every run, keeps them from then on.
    """
    for key, value in {"sb_dataset": "simulated", "sb_sim_n": 30, "sb_sim_p": 4, "sb_iterations": 3}.items():
        app.session_state[key] = value


def test_about_page_explains_model_strategies_and_timing(app):
    app.switch_page("pages/about.py").run()
    assert not app.exception
    assert len(app.latex) >= 6
    headers = [h.value for h in app.header]
    assert {"The model", "What each strategy compiles", "How timings are taken"} <= set(headers)
    text = " ".join(m.value for m in app.markdown)
    from core import strategies

    assert all(f"**{name}**" in text for name in strategies.names())
    assert "570" in text


def test_under_the_hood_inspects_a_tiny_fit_and_runs_a_pitfall(app):
    tiny_problem(app)
    app.switch_page("pages/under_the_hood.py").run()
    assert not app.exception
    app.selectbox(key="uth_strategy").set_value("jit_per_function")
    app.button(key="uth_go").click().run()
    assert not app.exception
    assert any("simulated 30x4" in s.value for s in app.subheader)
    labels = [e.label for e in app.expander]
    for prefix in ("Python source", "jaxpr", "StableHLO", "Optimized HLO"):
        assert any(label.startswith(prefix) for label in labels), prefix
    assert len(app.tabs) >= 10  # five executables, twice (StableHLO and optimized HLO)
    assert any("func.func" in c.value for c in app.code) and any("HloModule" in c.value for c in app.code)
    assert [m.value for m in app.metric if m.label == "Executables"] == ["5"]
    app.button(key="uth_run_trace_precedence").click().run()
    assert not app.exception
    assert len(app.dataframe) >= 2  # the per-executable table and the pitfall's values
    assert any("tr(Omega (M^T M + D))" in str(frame.value) for frame in app.dataframe)


def test_under_the_hood_says_eager_compiles_nothing(app):
    tiny_problem(app)
    app.switch_page("pages/under_the_hood.py").run()
    app.selectbox(key="uth_strategy").set_value("eager")
    app.button(key="uth_go").click().run()
    assert not app.exception
    assert any("Nothing is compiled ahead of time" in i.value for i in app.info)
    assert not any(e.label.startswith("StableHLO") for e in app.expander)
