"""benchmarks/corpus.py can fail: a check that cannot fail proves nothing. It exits 1, saying
why, when its verdicts fail or its process's memory passes its bound, and 0 otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

from project import ROOT

ONE_FIT = ["--sets", "simulated p=1", "--precisions", "float64", "--peer-precisions", "--repeats", "1"]


def _corpus(tmp_path, *args):
    env = dict(os.environ, PLNLAB_JAX_CACHE=str(tmp_path / "jax"))
    return subprocess.run([sys.executable, "benchmarks/corpus.py", *ONE_FIT, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_the_corpus_table_passes_on_a_set_it_solves_and_fails_when_its_memory_passes_the_bound(tmp_path):
    passed = _corpus(tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "simulated p=1" in passed.stdout and " MB]" in passed.stdout and "FAILED" not in passed.stdout
    failed = _corpus(tmp_path, "--max-rss-mb", "1")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAILED: memory passed 1 MB; the table stopped there" in failed.stdout
