"""The command line, as a user runs it: real processes, one store, JSON on the last line."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

REQUIRED = {"id", "strategy", "dataset", "n", "p", "precision", "device", "iterations", "optimizer", "status",
            "error", "compile_s", "first_call_s", "run_s", "run_s_min", "run_s_max", "per_iter_ms",
            "compile_count", "recompile_count", "cache", "final_elbo", "elbo", "versions"}
from core.store.run_store import RunStore

from project import ROOT
from xla_settings import with_device_count


def cli(*args, env=None):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True, cwd=ROOT,
                          env=full_env, timeout=300)


@pytest.fixture
def store(tmp_path):
    RunStore(tmp_path / "runs.sqlite3")  # there, empty: the commands that read a store refuse a missing one
    return {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax")}


def test_a_mistyped_variable_is_warned_of_and_changes_nothing(store):
    done = cli("list", env=dict(store, PLNLAB_STORE="/tmp/elsewhere.sqlite3"))
    assert done.returncode == 0 and f"no runs stored in {store['PLNLAB_DB']}" in done.stderr
    assert done.stderr.startswith("python -m core: warning: PLNLAB_STORE is no setting of PLN JIT Lab and is "
                                  "ignored (did you mean PLNLAB_DB?)"), done.stderr


def test_strategies_json():
    done = cli("strategies", "--json")
    assert done.returncode == 0
    listed = json.loads(done.stdout.strip().splitlines()[-1])
    assert [item["name"] for item in listed][:3] == ["eager", "jit_per_function", "jit_step"]
    assert all(set(item) == {"name", "description"} for item in listed)


def test_run_json_then_disk_cache_in_a_second_process(store):
    args = ["run", "--dataset", "oaks", "--strategy", "scan", "--iterations", "20", "--repeats", "2", "--json"]
    first = cli(*args, env=store)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert REQUIRED <= set(result)
    assert result["status"] == "ok" and result["cache"] == "compiled" and result["recompile_count"] == 0
    assert (result["n"], result["p"], result["dataset"]) == (116, 114, "oaks x1")
    assert len(result["elbo"]) == 20 and result["final_elbo"] == result["elbo"][-1]
    assert "done" in first.stderr  # progress went to stderr, not stdout

    second = json.loads(cli(*args, env=store).stdout.strip().splitlines()[-1])
    assert second["cache"] == "disk" and second["compile_count"] == 0 and second["disk_cache_hits"] >= 1
    assert second["compile_s"] < result["compile_s"]
    assert second["elbo"] == result["elbo"] and second["id"] == result["id"] + 1

    listed = json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1])
    assert [run["id"] for run in listed] == [second["id"], result["id"]]
    assert REQUIRED - {"elbo"} <= set(listed[0])


def test_a_diverged_run_says_its_ends_elbo_is_the_last_finite_one_with_the_advice(store):
    done = cli("run", "--strategy", "scan", "--optimizer", "adam", "--lr", "10", "--init", "seed",
               "--iterations", "50", "--repeats", "1", env=store)
    assert done.returncode == 0, done.stderr
    summary, error = done.stdout.strip().splitlines()[-2:]
    iterations = int(re.search(r"= (\d+) iterations?", summary).group(1))
    # Numbered from 0, as the error numbers the first that was not finite, and as the charts do.
    assert " diverged;" in summary and "last finite ELBO " in summary and f"(iteration {iterations - 1})" in summary
    assert f"not finite at iteration {iterations}" in error or "blew up" in error
    assert "final ELBO" not in summary
    assert "try the default, 0.01" in error


def test_cold_compiles_from_scratch_every_time_and_leaves_the_cache_filled(store):
    args = ["run", "--dataset", "oaks", "--strategy", "scan", "--iterations", "10", "--repeats", "1", "--json"]
    warm = json.loads(cli(*args, env=store).stdout.strip().splitlines()[-1])
    assert warm["cache"] == "compiled" and warm["from_scratch"] == 0
    # The executable is on disk now; --cold compiles anyway, twice in a row.
    for _ in range(2):
        done = cli(*args, "--cold", env=store)
        assert done.returncode == 0, done.stderr
        cold = json.loads(done.stdout.strip().splitlines()[-1])
        assert cold["cache"] == "compiled" and cold["from_scratch"] == 1
        assert cold["compile_count"] >= 1 and cold["disk_cache_hits"] == 0 and cold["compile_s"] > 0
        assert cold["elbo"] == warm["elbo"]
    # Without --cold the next process loads what the cold runs left in the cache.
    after = json.loads(cli(*args, env=store).stdout.strip().splitlines()[-1])
    assert after["cache"] == "disk" and after["compile_count"] == 0 and after["from_scratch"] == 0
    text = cli(*args[:-1], "--cold", env=store).stdout
    assert "(compiled)" in text


def test_export_then_import_into_another_store(store, tmp_path):
    ran = cli("run", "--dataset", "simulated", "--n", "30", "--p", "4", "--iterations", "5", "--repeats", "1",
              "--precision", "float32", env=store)
    assert ran.returncode == 0
    # The ELBO to the digits float32 holds, on the run's line and in the list; JSON has them all.
    elbo = re.search(r"final ELBO (\S+)", ran.stdout).group(1)
    assert len(elbo.lstrip("-").replace(".", "").lstrip("0")) <= 8, elbo
    listed = cli("list", env=store).stdout
    header, line = listed.splitlines()
    named = header.split()
    assert named[:2] == ["id", "strategy"] and named[-6:] == ["iterations", "per", "iteration", "compile", "ELBO",
                                                              "dataset"]
    assert f"  {elbo} " in line and " 5 " in line  # its iterations beside its ELBO
    assert line.endswith(" simulated 30x4 d=1 (seed 0)")  # the data's name last, whatever its length
    # Compile as the dashboard counts it (trace, lower, compile), with where the program came from.
    assert re.search(r"\d+\.\d{3} s \((compiled|disk|memory)\)", line), listed
    exported = tmp_path / "runs.json"
    assert cli("export", str(exported), env=store).returncode == 0
    other = dict(store, PLNLAB_DB=str(tmp_path / "other.sqlite3"))
    done = cli("import", str(exported), env=other)
    assert done.returncode == 0 and "imported 1" in done.stdout
    assert len(json.loads(cli("list", "--json", env=other).stdout.strip().splitlines()[-1])) == 1
    # A backup of it is a whole store of its own; a second one to the same file is refused.
    backup = tmp_path / "backup.sqlite3"
    done = cli("backup", str(backup), env=other)
    assert done.returncode == 0 and "(1 runs) to" in done.stdout
    assert len(json.loads(cli("list", "--json", env=dict(other, PLNLAB_DB=str(backup))).stdout.splitlines()[-1])) == 1
    again = cli("backup", str(backup), env=other)
    assert again.returncode == 2 and "exists; a backup never replaces a file" in again.stderr


BAD_INPUTS = [
    (["run", "--strategy", "nope"], "strategy must be one of"),
    (["run", "--iterations", "0"], "iterations must be between"),
    (["run", "--iterations", "many"], "invalid int value"),
    (["run", "--precision", "float16"], "invalid choice"),
    (["run", "--device", "gpu"], "device 'gpu' is not available"),
    (["run", "--optimizer", "adam", "--lr", "-1"], "lr must be between"),
    (["run", "--replicate", "0"], "replicate must be between"),
    (["run", "--dataset", "simulated", "--n", "1"], "n must be between"),
    (["run", "--dataset", "csv"], "needs --counts"),
    (["run", "--dataset", "csv", "--counts", "/nonexistent.csv"], "no such file"),
    (["run", "--counts", "/nonexistent.csv"], "no such file"),  # --counts is csv data
    (["solve", "--counts", "/tmp"], "/tmp is a folder, not a file: name the CSV file in it"),
    (["import", "/tmp"], "/tmp is a folder, not a file"),
    (["solve", "--dataset", "simulated", "--counts", "counts.csv"], "--counts and --offsets apply to --dataset csv"),
    (["run", "--tol", "2"], "tol must be between"),
    (["run", "--repeats", "0"], "repeats must be between"),
    (["run", "--devices", "-1"], "devices must be between 0 and 4,096"),
    (["run", "--devices", "2", "--strategy", "scan"], "devices > 1 needs the sharded strategy"),
    (["run", "--devices", "3"], "this process has 1 cpu device: simulated CPU devices need "
                                "XLA_FLAGS=--xla_force_host_platform_device_count=3"),
    (["run", "--dataset", "simulated_on_device", "--strategy", "jit_step"], "only the sharded strategy fits it"),
    (["import", "/nonexistent.json"], "no such file"),
    (["frobnicate"], "invalid choice"),
    (["run", "--dataset", "simulated", "--n", "10000000", "--p", "2000", "--precision", "float64"],
     "not enough memory: this fit needs about 8,640 GB"),
    (["run", "--optimizer", "adam", "--lr", "nan"], "lr must be between"),
    (["run", "--tol", "-0.1"], "tol must be between"),
    (["run", "--dataset", "simulated", "--p", "0"], "p must be between"),
    (["run", "--dataset", "simulated", "--n", "5", "--d", "5"], "d must be smaller than n"),
    (["run", "--dataset", "simulated", "--seed", "-1"], "seed must be between"),
    (["run", "--iterations", "2000000"], "iterations must be between 1 and 1,000,000"),
    (["run", "--strategy", "eager", "--iterations", "1000000", "--repeats", "100"],
     "too long for this server: 1,000,000 iterations x 101 calls of eager would hold the cpu for at least"),
    (["run", "--db", "/proc/version"], "cannot open the run store"),
    (["list", "--limit", "-1"], "--limit must be a whole number"),
    (["export", "runs.txt"], "unknown format"),
    (["export", "runs.json", "--ids", "999"], "no run with id 999"),
    (["list", "--db", "/nonexistent/runs.sqlite3"], "no run store at /nonexistent/runs.sqlite3 (--db)"),
    (["export", "runs.json", "--db", "/tmp/mistyped-plnlab-store.sqlite3"], "no run store at"),
    (["export", "/nonexistent/folder/runs.json"], "no such folder: /nonexistent/folder"),
    (["backup", "x.sqlite3", "--db", "/nonexistent/runs.sqlite3"], "no run store at"),
    (["bench", "--sizes", "0"], "replicate must be between"),
    (["bench", "--repeats", "0"], "repeats must be between"),
    (["bench", "--trajectory-cap", "0"], "--trajectory-cap must be at least 1"),
    (["run", "--formula", "~ 1 + tree +"], "formula '~ 1 + tree +' has a '+' or '-' with no term after it"),
    (["solve", "--formula", "~ 1 + sitex"], "formula names 'sitex', not a column of oaks' sample table"),
]


@pytest.mark.parametrize("args,message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line(args, message, store):
    done = cli(*args, env=store)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_sharded_run_over_some_devices_with_data_drawn_on_them(store):
    # 2 of 3 simulated devices; the strategy defaults to sharded for data drawn on the devices.
    env = dict(store, XLA_FLAGS=with_device_count(3))
    done = cli("run", "--dataset", "simulated_on_device", "--n", "50", "--p", "4", "--d", "2", "--seed", "3",
               "--devices", "2", "--iterations", "5", "--repeats", "1", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["strategy"], result["devices"], result["processes"]) == ("sharded", 2, 1)
    assert (result["n"], result["p"], result["d"]) == (50, 4, 2) and result["status"] == "ok"
    assert result["dataset"] == "simulated on device 50x4 d=2 (seed 3)" and len(result["elbo"]) == 5
    assert result["spec"]["devices"] == 2 and result["spec"]["dataset"]["kind"] == "simulated_on_device"
    listed = json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1])
    assert [(run["id"], run["devices"], run["processes"]) for run in listed] == [(result["id"], 2, 1)]


def test_bad_csv_is_refused_and_nothing_is_stored(store, tmp_path):
    counts = tmp_path / "counts.csv"
    counts.write_text("a,b,c\n1,2,3\n4,-5,6\n7,8,9\n")
    done = cli("run", "--dataset", "csv", "--counts", str(counts), env=store)
    assert done.returncode == 2 and "negative" in done.stderr.lower()
    assert json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("content, said", [
    ("a,b\n1," + "x" * 200_000 + "\n3,4\n", "line 2 is 200,002 characters long"),
    ("a,b\n" + "1,2\n" * 3000 + "1," + "x" * 200_000 + "\n", "(200,000 characters)"),
])
def test_a_csv_with_a_huge_cell_is_one_line_and_exit_2(store, tmp_path, content, said):
    counts = tmp_path / "huge.csv"
    counts.write_text(content)
    done = cli("run", "--dataset", "csv", "--counts", str(counts), env=store)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-500:]
    assert said in done.stderr and len(done.stderr) < 400


def test_a_wide_csv_is_refused_with_the_cap_named_and_nothing_is_stored(store, tmp_path):
    counts = tmp_path / "wide.csv"
    counts.write_text("".join(",".join(str((i + j) % 10) for j in range(10_000)) + "\n" for i in range(4)))
    done = cli("run", "--dataset", "csv", "--counts", str(counts), "--strategy", "eager", env=store)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "10,000 columns; this server fits at most 2,000 (PLNLAB_MAX_COLUMNS)" in done.stderr
    assert json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1]) == []


def test_a_backup_says_the_recently_deleted_runs_it_keeps(store, tmp_path):
    from fake_runs import make_run

    held = RunStore(store["PLNLAB_DB"])
    ids = [held.add(make_run("scan", created_at=float(k))) for k in (1, 2, 3)]
    held.delete(ids[:1])
    done = cli("backup", str(tmp_path / "copy.sqlite3"), env=store)
    assert done.returncode == 0 and "(2 runs, and 1 recently deleted) to" in done.stdout
    assert [run.id for run, _ in RunStore(tmp_path / "copy.sqlite3").deleted()] == ids[:1]


def test_solve_fits_to_convergence_then_reuses_the_fastest_stored_configuration(store):
    args = ["solve", "--dataset", "simulated", "--n", "40", "--p", "6", "--precision", "float64", "--repeats", "1",
            "--json"]
    first = cli(*args, env=store)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert REQUIRED | {"time_to_solution_s", "iterations_run"} <= set(result)
    assert (result["strategy"], result["optimizer"], result["tol"]) == ("scan", "preconditioned_lbfgs", 1e-9)
    assert result["time_to_solution_s"] == result["run_s"] and result["iterations_run"] < result["iterations"]
    assert "the lab's default" in first.stderr
    second = cli(*args, env=store)
    assert second.returncode == 0 and f"run #{result['id']}" in second.stderr
    # Out of iterations: said once, with how far the fit believes it is, on stderr beside --json.
    capped = cli(*args, "--iterations", "2", env=store)
    assert capped.returncode == 5 and capped.stderr.count("not converged") == 1  # stored, no solution
    assert re.search(r"after all 2 iterations, above the tolerance 1e-09; checked in float64, its gradient puts it "
                     r"about \de-\d\d \(relative\) below the optimum", capped.stderr), capped.stderr
    assert cli("solve", "--tol", "0", env=store).returncode == 2
    refused = cli("solve", "--strategy", "scan_analytic", "--optimizer", "lbfgs", env=store)
    assert refused.returncode == 2 and "runs only the optimizers" in refused.stderr


def test_solve_writes_what_the_fit_estimates_named_by_the_files_columns(store, tmp_path):
    rng = np.random.default_rng(2)
    counts, samples = tmp_path / "counts.csv", tmp_path / "samples.csv"
    counts.write_text("a,b,c\n" + "".join(f"{x},{y},{z}\n" for x, y, z in rng.poisson(4, (50, 3))))
    samples.write_text("site\n" + "".join(f"{'uvw'[i % 3]}\n" for i in range(50)))
    folder = tmp_path / "out" / "estimates"
    done = cli("solve", "--dataset", "csv", "--counts", str(counts), "--covariates", str(samples), "--precision",
               "float64", "--repeats", "1", "--estimates", str(folder), env=store)
    assert done.returncode == 0, done.stderr
    assert f"wrote {folder / 'coefficients.csv'}" in done.stderr
    coef = pd.read_csv(folder / "coefficients.csv", index_col=0)
    assert list(coef.index) == ["(intercept)", "site[v]", "site[w]"] and list(coef.columns) == ["a", "b", "c"]
    sigma = pd.read_csv(folder / "covariance.csv", index_col=0)
    assert list(sigma.columns) == ["a", "b", "c"] and np.allclose(sigma.to_numpy(), sigma.to_numpy().T)
    assert np.all(np.linalg.eigvalsh(sigma.to_numpy()) > 0)
    # A folder that cannot be: said before the fit, in one line, and nothing stored.
    runs = len(json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1]))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for path in (blocked, blocked / "x"):
        refused = cli("solve", "--dataset", "csv", "--counts", str(counts), "--estimates", str(path), env=store)
        assert refused.returncode == 2 and f"--estimates {path}: {blocked} is a file, not a folder" in refused.stderr
    # Refused input makes no folder for the estimates (empty ones were left behind).
    refused = cli("solve", "--counts", str(counts), "--covariates", str(samples), "--formula", "~ 1 + sight",
                  "--estimates", str(tmp_path / "new" / "fit"), env=store)
    assert refused.returncode == 2 and "not a column of samples.csv" in refused.stderr
    assert not (tmp_path / "new").exists()
    # A bad flag: its one line, before any line about how the file was read.
    refused = cli("solve", "--counts", str(counts), "--tol", "5", env=store)
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        "python -m core: error: solve stops at a tolerance: --tol must be > 0 and at most 0.99; got 5.0"]
    assert len(json.loads(cli("list", "--json", env=store).stdout.strip().splitlines()[-1])) == runs
    # Written again, --counts alone naming the data (oaks was fitted without --dataset csv):
    # said to replace the earlier fit's files.
    again = cli("solve", "--counts", str(counts), "--covariates", str(samples), "--precision",
                "float64", "--repeats", "1", "--estimates", str(folder), env=store)
    assert again.returncode == 0 and f"wrote {folder / 'coefficients.csv'} (replacing the file there)" in again.stderr
    assert "csv counts.csv" in (folder / "README.txt").read_text().splitlines()[0]
    # Out of iterations: stored, its estimates written and said to be where it stopped, and
    # the status that of no solution.
    short = cli("solve", "--counts", str(counts), "--iterations", "3", "--repeats", "1", "--estimates",
                str(tmp_path / "short"), env=store)
    assert short.returncode == 5 and "where the fit stopped, which is not its optimum" in short.stderr
    assert (tmp_path / "short" / "coefficients.csv").is_file()


def test_solve_says_how_it_read_a_csv_and_reuses_no_run_of_another_file_of_the_same_name(store, tmp_path):
    rng = np.random.default_rng(0)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    # A table written by pandas' to_csv from an array: its header is the column numbers, which
    # read as counts too.
    (first / "x.csv").write_text("0,1,2\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rng.poisson(3, (40, 3))))
    (second / "x.csv").write_text("".join(f"{a},{b}\n" for a, b in rng.poisson(20, (30, 2))))
    capped = cli("solve", "--dataset", "csv", "--counts", str(first / "x.csv"), "--iterations", "2", "--repeats", "1",
                 "--precision", "float64", "--json", env=store)
    assert capped.returncode == 5, capped.stderr  # stored, but 2 iterations are no solution
    assert "line 1 read as data" in capped.stderr  # said, as `run` says it: its ids could be counts
    # Another file of the same name: not the problem the capped run solved.
    other = cli("solve", "--dataset", "csv", "--counts", str(second / "x.csv"), "--header", "no", "--repeats", "1",
                "--precision", "float64", "--json", env=store)
    assert other.returncode == 0, other.stderr
    assert "the lab's default" in other.stderr and "at most 2 iterations" not in other.stderr
    assert json.loads(other.stdout.strip().splitlines()[-1])["iterations"] > 2


def test_run_and_solve_say_a_run_will_pass_the_time_budget(tmp_path, capsys, monkeypatch):
    # As the Run page does, from the store's runs of the same kind (core.run.time_estimate).
    from specs import tutorial_spec

    from core.cli.fitting import say_planned_time
    from core.spec import DatasetSpec
    from core.store.run_store import RunStore

    from fake_runs import make_run

    monkeypatch.setenv("PLNLAB_MAX_RUN_SECONDS", "300")
    store = RunStore(tmp_path / "runs.sqlite3")
    stored = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="oaks", replicate=100), iterations=50)
    store.add(make_run("scan", iterations=50, spec=stored.to_dict(), spec_key=stored.key, dataset="oaks x100",
                       n=11_600, p=114, run_s=10.0, run_s_min=10.0, run_s_max=10.0))  # 0.2 s an iteration
    planned = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="oaks", replicate=1000), iterations=50)
    say_planned_time(store, planned, None)
    said = capsys.readouterr().err
    assert said.startswith("About 6 minutes 40 s by this server's earlier runs, scaled to this size (scan: 50 "
                           "iterations x 4 calls at 2,000 ms, from 200 ms at 11,600 x 114, and 0.32 s to make its "
                           "program)"), said
    assert "That passes the 5 minutes a run may hold the device" in said and "With Repeats at 1 it would fit" in said
    say_planned_time(store, stored, None)  # x100 itself: 40 s, under the budget, said without a warning
    said = capsys.readouterr().err
    assert said.startswith("About 40.3 s") and "passes" not in said, said


def test_delete_and_restore_runs_all_or_nothing(store):
    from fake_runs import make_run

    held = RunStore(store["PLNLAB_DB"])
    ids = [held.add(make_run("scan", created_at=float(k))) for k in (1, 2, 3)]
    # An id not in the store among them: nothing is deleted, and the line names it.
    done = cli("delete", str(ids[0]), "99", env=store)
    assert done.returncode == 2 and "no run #99 in" in done.stderr and "nothing was deleted" in done.stderr
    assert held.count() == 3
    done = cli("delete", str(ids[0]), str(ids[1]), env=store)
    assert done.returncode == 0, done.stderr
    assert f"deleted 2 runs (#{ids[0]}, #{ids[1]})" in done.stdout and f"restore {ids[0]} {ids[1]}" in done.stdout
    assert [run.id for run in held.list()] == [ids[2]]
    listed = json.loads(cli("list", "--deleted", "--json", env=store).stdout.strip().splitlines()[-1])
    assert sorted(item["id"] for item in listed) == ids[:2]
    assert all(item["restorable_until"] - item["deleted_at"] == 14 * 86400 for item in listed)
    # An id the store does not hold among those to restore: nothing is restored.
    done = cli("restore", str(ids[0]), "99", env=store)
    assert done.returncode == 2 and "no deleted run #99" in done.stderr and held.count() == 1
    # A live run among them is said, as delete says a deleted one.
    done = cli("restore", str(ids[0]), str(ids[2]), env=store)
    assert done.returncode == 0 and f"restored 1 run (#{ids[0]})" in done.stdout
    assert f"(#{ids[2]} was not deleted)" in done.stdout
    assert sorted(run.id for run in held.list()) == [ids[0], ids[2]]
    assert [run.id for run, _ in held.deleted()] == [ids[1]]


def test_a_reader_that_went_away_ends_the_listing_quietly(store):
    from fake_runs import make_run

    held = RunStore(store["PLNLAB_DB"])
    for k in range(3):
        held.add(make_run("scan", created_at=float(k)))
    listing = subprocess.Popen([sys.executable, "-m", "core", "list"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, **store))
    listing.stdout.close()  # the reader gone before the first line (`list | head -0`)
    assert listing.wait(timeout=120) == 141  # as a shell reports a process killed by SIGPIPE
    assert listing.stderr.read() == b""  # no internal error, no traceback
