"""The machine's state kept with a run: what the CPU is, which code ran, and how much of the
cores other processes took while it was timed; a busy machine makes a run "unstable"."""

import subprocess
import sys
import time

from core.machine import machine_state
from core.results import stability

BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def test_the_facts_name_the_cpu_the_cores_and_the_commit(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    facts = machine_state.facts()
    assert facts["usable_cores"] == len(machine_state.usable_cores()) >= 1
    assert facts["affinity"] and facts["cpu_model"]
    assert facts["jax_flags"]["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert facts["commit"] is None or len(facts["commit"]) == 40  # a clone has one; an unpacked copy none


def test_other_processes_busy_while_a_run_is_timed_make_it_unstable():
    cores = len(machine_state.usable_cores())
    with machine_state.Watch() as watch:
        burners = [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=1.0)]) for _ in range(cores)]
        for burner in burners:
            burner.wait()
        time.sleep(0.05)
    state = watch.state()
    # Every usable core taken by another process for most of the window.
    assert state["others_cpu_share"] > 0.5, state
    assert state["load_before"] is not None and state["timed_s"] >= 1.0
    reason = stability.unstable({**state, "usable_cores": cores})
    assert reason.startswith("unstable: other processes used") and f"of the {cores} usable cores" in reason


def test_runs_timed_together_on_a_busy_machine_are_said_unstable_by_the_busiest_share():
    reason = stability.unstable_together([{"others_cpu_share": 0.3, "usable_cores": 2}, None,
                                          {"others_cpu_share": 0.49, "usable_cores": 2}])
    assert reason.startswith("unstable: other processes used up to 49% of the 2 usable cores while these runs "
                             "were timed, so their timings"), reason
    assert stability.unstable_together([{"others_cpu_share": 0.1}, {}]) == ""


def test_runs_without_a_machine_state_or_on_a_quiet_machine_are_not_unstable():
    assert stability.unstable({}) == "" and stability.unstable(None) == ""
    assert stability.unstable({"others_cpu_share": 0.1, "usable_cores": 2}) == ""
