"""The explaining pages (Under the hood, About) run in the real app without exceptions."""

import os

import pytest
from specs import tutorial_spec
from streamlit.testing.v1 import AppTest

from project import APP


@pytest.fixture
def app(tmp_path, monkeypatch, cluster):
    def set_peak_kernels(sizes: dict, dask_worker=None) -> dict:
        """On a worker (nested, so that it is sent by value): the roofline's kernel sizes set
        to `sizes`; returns the sizes it had."""
        from core.inspect import roofline

        before = {name: getattr(roofline, name) for name in sizes}
        for name, value in sizes.items():
            setattr(roofline, name, value)
        return before

    monkeypatch.setenv("PLNLAB_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("PLNLAB_JAX_CACHE", str(tmp_path / "jax-cache"))
    # The roofline's peaks, measured on the worker: kernels of a few kilobytes, in milliseconds.
    tiny = {"_MATMUL_SIZE": 32, "_EXP_ELEMENTS": 1 << 10, "_STREAM_ELEMENTS": 1 << 12, "_REPEATS": 2}
    before = list(cluster.client.run(set_peak_kernels, tiny).values())[0]
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    yield at
    cluster.client.run(set_peak_kernels, before)


def tiny_problem(app) -> None:
    """The sidebar's settings for a simulated 30 x 4 fit of 3 iterations, with the tutorial's
    optimizer (which every strategy runs, jit_per_function included).

    Set through session state; the sidebar, drawn on every run, keeps them from then on.
    """
    for key, value in {"sb_dataset": "simulated", "sb_sim_n": 30, "sb_sim_p": 4, "sb_iterations": 3,
                       "sb_optimizer": "seed", "sb_init": "seed"}.items():
        app.session_state[key] = value


def inspect(app, strategy: str) -> None:
    """Open Under the hood on the tiny problem, inspect `strategy`, and check nothing raised."""
    tiny_problem(app)
    app.switch_page("pages/under_the_hood/page.py").run()
    app.selectbox(key="uth_strategy").set_value(strategy)
    app.button(key="uth_go").click().run()
    assert not app.exception


def test_about_page_explains_model_strategies_and_timing(app):
    app.switch_page("pages/about/page.py").run()
    assert not app.exception
    assert len(app.latex) >= 6
    headers = [h.value for h in app.header]
    assert {"The model", "What each strategy compiles", "How timings are taken"} <= set(headers)
    text = " ".join(m.value for m in app.markdown)
    from core.fit import strategies

    assert all(f"**{name}**" in text for name in strategies.names())
    assert "570" in text


def test_under_the_hood_inspects_a_tiny_fit_and_runs_a_pitfall(app):
    tiny_problem(app)
    app.switch_page("pages/under_the_hood/page.py").run()
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
    # Inspect again shows the kept inspection, and says so.
    app.button(key="uth_go").click().run()
    assert any("kept by this server for every session" in c.value for c in app.caption)
    # And another session sees it without pressing Inspect.
    other = AppTest.from_file(APP, default_timeout=120)
    other.run()
    tiny_problem(other)
    other.switch_page("pages/under_the_hood/page.py").run()
    other.selectbox(key="uth_strategy").set_value("jit_per_function").run()
    assert not other.exception and not any("Press **Inspect**" in i.value for i in other.info)
    assert [m.value for m in other.metric if m.label == "Executables"] == ["5"]
    app.button(key="uth_run_trace_precedence").click().run()
    assert not app.exception
    assert len(app.dataframe) >= 2  # the per-executable table and the pitfall's values
    assert any("tr(Omega (M^T M + D))" in str(frame.value) for frame in app.dataframe)
    app.button(key="uth_run_recompiles").click().run()
    assert not app.exception
    (listed,) = [m.value for m in app.markdown if m.value.startswith("- **jit inside the loop**")]
    assert listed.count("\n- ") == 8 and "defined repeatedly" in listed


def test_under_the_hood_traces_an_iteration_of_each_strategy_on_a_worker(app):
    tiny_problem(app)
    app.switch_page("pages/under_the_hood/page.py").run()
    assert "Inside one iteration: a timeline" in [h.value for h in app.header]
    # The button names what it will trace: with a profiled optimizer, not jit_per_function.
    app.session_state["sb_optimizer"] = "preconditioned_lbfgs"
    app.run()
    assert app.button(key="uth_trace").label == "Trace eager, jit_step, scan"
    app.session_state["sb_optimizer"] = "seed"
    app.run()
    assert app.button(key="uth_trace").label == "Trace eager, jit_per_function, jit_step, scan"
    app.button(key="uth_trace").click().run()
    assert not app.exception and not app.error
    summary = next(frame.value for frame in app.dataframe if "launches/it" in frame.value.columns)
    assert list(summary["strategy"]) == ["eager", "jit_per_function", "jit_step", "scan"]
    assert summary["launches/it"].iloc[0] > summary["launches/it"].iloc[-1]
    assert app.get("vega_lite_chart")  # the timeline
    assert [b for b in app.get("download_button") if "Perfetto" in b.proto.label]
    # Another strategy in the page's box is the same traced problem; another size is not.
    app.selectbox(key="uth_strategy").set_value("jit_step").run()
    assert not any("problem has changed" in c.value for c in app.caption)
    app.session_state["sb_sim_n"] = 31
    app.run()
    assert any("problem has changed" in c.value for c in app.caption)
    # The tutorial's optimizer has no named parts; the default's compiled iterations are
    # told apart by part of the algorithm.
    assert not any("share of XLA's time" in frame.value.columns for frame in app.dataframe)
    app.session_state["sb_optimizer"] = "preconditioned_lbfgs"
    app.run()
    app.button(key="uth_trace").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    parts = next(frame.value for frame in app.dataframe if "share of XLA's time" in frame.value.columns)
    assert set(parts["strategy"]) == {"jit_step", "scan"}
    assert {"direction", "line search", "p x p (factor, inverse, log-det)"} <= set(parts["part"])


def test_under_the_hood_roofline_compares_a_stored_run_with_the_floor(app, monkeypatch):
    from core.run import engine
    from core.spec import DatasetSpec
    from core.store.run_store import RunStore

    # The sidebar's tiny problem, run once into the app's store (repeats differ: still a match).
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0), strategy="scan",
                         iterations=3, repeats=2)
    run_id = RunStore(os.environ["PLNLAB_DB"]).add(engine.run(spec))
    tiny_problem(app)
    app.switch_page("pages/under_the_hood/page.py").run()
    app.selectbox(key="uth_strategy").set_value("scan")
    app.button(key="uth_go").click().run()
    assert not app.exception
    assert any(s.value.startswith("Roofline") for s in app.subheader)
    assert any("optimistic" in m.value for m in app.markdown)
    metrics = {m.label: m.value for m in app.metric}
    assert {"Matmul GFLOP/s", "exp G/s", "Bandwidth GB/s",
            "Floor / iteration", "Compute side", "Memory side"} <= set(metrics)
    assert metrics["Binds"] in ("compute", "memory")
    assert metrics["× floor"].endswith("×") and float(metrics["× floor"].rstrip("×").replace(",", "")) > 0
    assert any(f"Run #{run_id}" in c.value for c in app.caption)
    # The stored run is of the tutorial's optimizer, the sidebar's problem of another: counted as what it is.
    assert any(f"Run #{run_id}" in c.value and "the one stored run of the same strategy" in c.value
               for c in app.caption), [c.value for c in app.caption]
    assert app.get("vega_lite_chart")  # the roofline chart (st.altair_chart's element type)
    from pages.under_the_hood import roofline_panel

    asked = []
    monkeypatch.setattr(roofline_panel, "measure_peaks", lambda *args, original=roofline_panel.measure_peaks, **kw:
                        asked.append(kw.get("remeasure", args[2] if len(args) > 2 else False)) or original(*args, **kw))
    app.button(key="uth_remeasure").click().run()
    assert not app.exception
    assert asked == [True, False]  # measured again on a worker once, then read back from its cache
    assert "Floor / iteration" in {m.label for m in app.metric}


def test_under_the_hood_roofline_warns_when_a_run_beats_the_floor(app):
    import dataclasses

    from core.run import engine
    from core.spec import DatasetSpec
    from core.store.record_checks import MIN_TIMED_CALL_S
    from core.store.run_store import RunStore

    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0), strategy="jit_step",
                         iterations=3, repeats=1)
    measured = engine.run(spec)  # then made as fast as a store accepts, every timing alike: faster than physics
    fastest = MIN_TIMED_CALL_S
    impossible = dataclasses.replace(measured, run_s=fastest, run_s_min=fastest, run_s_max=fastest,
                                     repeat_times=[fastest], per_iter_ms=1e3 * fastest / measured.iterations_run)
    RunStore(os.environ["PLNLAB_DB"]).add(impossible)
    inspect(app, "jit_step")
    floor = next(m.value for m in app.metric if m.label == "Floor / iteration")
    assert any("Faster than the floor" in w.value for w in app.warning), f"floor {floor}"


def test_under_the_hood_roofline_without_runs_says_how_to_get_one(app):
    inspect(app, "fori_loop")
    assert "Floor / iteration" in {m.label for m in app.metric}
    assert any("No stored run" in i.value for i in app.info)


def test_under_the_hood_says_eager_compiles_nothing(app):
    inspect(app, "eager")
    assert any("Nothing is compiled ahead of time" in i.value for i in app.info)
    assert not any(e.label.startswith("StableHLO") for e in app.expander)
    assert "Matmul GFLOP/s" in {m.label for m in app.metric}  # the machine's peaks, but no floor
    assert "Floor / iteration" not in {m.label for m in app.metric}
    assert any("no floor" in i.value for i in app.info)


def test_under_the_hood_shows_where_the_sharded_arrays_live(app):
    inspect(app, "sharded")
    assert "Where the arrays live" in [s.value for s in app.subheader]
    table = next(frame.value for frame in app.dataframe if "per-device shape" in frame.value)
    rows = table.set_index("array")
    # One device in this process: the row blocks are the whole arrays (simulated 30 x 4, float32).
    assert rows.loc["data.counts", "global shape"] == rows.loc["data.counts", "per-device shape"] == "30 × 4"
    assert rows.loc["data.counts", "sharding"].endswith("over mesh rows=1") and "'rows'" in rows.loc[
        "data.counts", "sharding"]
    assert rows.loc["data.counts", "bytes per device"] == 30 * 4 * 4
    assert rows.loc["state.precision", "global shape"] == "4 × 4"
    assert {"data.row_mask", "state.params.latent_mean", "state.params.coef"} <= set(rows.index)
    assert any("1 device" in c.value for c in app.caption)


def test_under_the_hood_shows_no_sharding_table_for_other_strategies(app):
    inspect(app, "scan")
    assert "Where the arrays live" not in [s.value for s in app.subheader]
