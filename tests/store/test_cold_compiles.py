"""The cold compile shown beside a cached run: same spec, same environment, the newest."""


from core.store import cold_compiles
from core.store.run_store import RunStore

from fake_runs import make_run


def test_a_cached_run_finds_the_newest_compile_of_its_problem_in_its_environment(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    older = make_run(created_at=100.0, compile_s=0.8)
    newer = make_run(created_at=200.0, compile_s=0.9)
    elsewhere = make_run(created_at=300.0, host="another-host")
    other_jax = make_run(created_at=310.0, versions={**older.versions, "jax": "0.5.0"})
    other_problem = make_run(created_at=320.0, iterations=6)
    interrupted = make_run(created_at=330.0, status="interrupted")
    for run in (older, newer, elsewhere, other_jax, other_problem, interrupted):
        store.add(run)
    cached = make_run(created_at=400.0, cache="disk", compile_s=0.01, compile_count=0)
    store.add(cached)
    assert cold_compiles.latest_for(store, cached).id == newer.id
    # A fit that diverged after compiling measured its compile whole: it stands for it too.
    diverged = make_run(created_at=350.0, status="diverged", compile_s=0.7)
    store.add(diverged)
    assert cold_compiles.latest_for(store, cached).id == diverged.id
    # A run that compiled itself needs no stand-in; nor does one that compiles nothing.
    assert cold_compiles.latest_for(store, newer) is None
    assert cold_compiles.latest_for(store, make_run(strategy="eager", cache="none")) is None
    # Nothing compiled in this environment: nothing to show, rather than a stranger's compile.
    lonely = make_run(created_at=500.0, cache="memory", host="a-third-host")
    assert cold_compiles.latest_for(store, lonely) is None


def test_a_run_that_loaded_another_strategys_program_finds_the_run_that_made_it(tmp_path):
    """scan_namedtuple loading the program scan compiled: one fingerprint, so scan's compile is
    what loading it saved, though their specs differ."""
    store = RunStore(tmp_path / "runs.sqlite3")
    maker = make_run(strategy="scan", created_at=100.0, compile_s=1.2, program="0123456789abcdef")
    unrelated = make_run(strategy="fori_loop", created_at=150.0, compile_s=0.7, program="fedcba9876543210")
    for run in (maker, unrelated):
        store.add(run)
    loader = make_run(strategy="scan_namedtuple", created_at=200.0, cache="disk", compile_s=0.01, compile_count=0,
                      program="0123456789abcdef")
    store.add(loader)
    assert cold_compiles.latest_for(store, loader).id == maker.id
    # Without a fingerprint (a run stored before they were kept) only its own spec counts.
    assert cold_compiles.latest_for(store, make_run(strategy="scan_namedtuple", created_at=300.0, cache="disk")) is None
