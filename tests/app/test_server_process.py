"""The dashboard's server never imports JAX, jaxlib or torch: every fit, inspection, peak
measurement and pitfall demonstration runs on a worker and comes back as plain data.

The pages are driven with AppTest (which runs them in the calling process, as the server
does) in a fresh process, through every page and every button that computes (a PyTorch
peer's run included: what comes back must unpickle without torch), then that process lists
what it has imported.
"""

from __future__ import annotations

import os
import subprocess
import sys

from project import ROOT

SESSION = """
import re
import sys
from streamlit.testing.v1 import AppTest

def check(at):
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert not errors, errors
    return at

at = check(AppTest.from_file("app.py", default_timeout=300).run())
at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
at.sidebar.number_input(key="sb_sim_n").set_value(40)
at.sidebar.number_input(key="sb_sim_p").set_value(5)
at.sidebar.number_input(key="sb_iterations").set_value(6)
at.sidebar.number_input(key="sb_repeats").set_value(1)
at.pills(key="run_strategies").set_value(["eager", "scan", "torch_eager"])
check(at.run())
# The sidebar's devices are what the workers have: the CPU's kind, on the worker's host.
devices = at.sidebar.radio(key="sb_device")
assert devices.options == ["cpu"] and re.fullmatch(r"\\d+ cores on \\S+", devices.proto.captions[0]), devices.proto
check(at.button(key="run_go").click().run())
assert [m.label for m in at.metric][:2] == ["Fastest fit", "Per iteration"], [m.label for m in at.metric]
check(at.switch_page("pages/story/page.py").run())
check(at.button(key="story_next").click().run())
check(at.switch_page("pages/compare/page.py").run())
check(at.switch_page("pages/scaling/page.py").run())
check(at.switch_page("pages/about/page.py").run())
check(at.switch_page("pages/under_the_hood/page.py").run())
check(at.button(key="uth_go").click().run())
assert any("FLOP / iteration" == m.label for m in at.metric), [m.label for m in at.metric]
check(at.button(key="uth_run_trace_precedence").click().run())
print("HEAVY", [m for m in ("jax", "jaxlib", "torch", "optax", "pyPLNmodels") if m in sys.modules])
"""


def test_the_server_process_never_imports_jax_or_torch(tmp_path):
    env = {**os.environ, "PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax")}
    done = subprocess.run([sys.executable, "-c", SESSION], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HEAVY []" in done.stdout, done.stdout[-2000:]
