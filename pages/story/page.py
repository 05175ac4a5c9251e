"""Story: the tutorial's levels one step at a time, for a talk: one click (or arrow key) per step.

Laid out for a projector (1024x768, sidebar open): the buttons, the step's name and its
speed-up, then the chart at a fixed height, all in the first screen and in the same place
at every step; what the step changes and the settings follow below."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.charts import bars
from core.inspect import pitfall_notes
from core.results import spread, story
from core.results.ordering import listed
from core.spec import SpecError, refusal
from core.store import cold_compiles
from pages.story import keys
from pages.ui import display, resources, running, settings, state
from pages.ui.text import md

st.title("The tutorial, step by step", anchor=False)

STEP = "story_step"
PENDING = "story_pending"  # a step reached by Next that has not run yet: run it on arrival
CHART_HEIGHT = 250  # with the buttons and the headline, inside 768 px on a projector
RECENT = 20  # stored runs looked at per step for a group timed together

steps = story.STEPS
state.default(STEP, 0)
st.session_state[STEP] = min(max(int(st.session_state[STEP]), 0), len(steps) - 1)


def move(delta: int) -> None:
    st.session_state[STEP] = min(max(st.session_state[STEP] + delta, 0), len(steps) - 1)
    st.session_state[PENDING] = delta > 0


problem = settings.current()
try:
    specs = story.specs(problem.fit_spec("eager"))
except SpecError as exc:
    settings.show_refusal(exc)
    st.stop()
store = resources.store_or_stop()


def stored_runs() -> list:
    return story.stored_choice([store.find_by_spec_key(spec.key, limit=RECENT, interrupted=False, with_elbo=False,
                                                       imported=False)
                                for spec in specs])


runs = stored_runs()
current = st.session_state[STEP]
together = story.all_timed_together(runs)
previous, following, warm = st.columns([1, 1, 2], vertical_alignment="center")
previous.button("Previous", key="story_prev", icon=":material/arrow_back:", on_click=move, args=(-1,),
                disabled=current == 0, width="stretch")
if current < len(steps) - 1:
    # No tooltips on these buttons: a presenter's mouse rests on them, and a tooltip covered the
    # page's title (through a whole warm-up). What they do is said at the page's foot.
    following.button("Next", key="story_next", icon=":material/arrow_forward:", on_click=move, args=(1,),
                     type="primary", width="stretch")
else:  # the talk's end: a way back to its start rather than a greyed-out Next (→ stays put here)
    following.button("Step 1", key="story_restart", icon=":material/first_page:", on_click=move,
                     args=(-len(steps),), width="stretch", help="back to the first step")
# Timed together on a busy machine, the steps say "time it again on a quiet machine": the
# button then offers that, rather than stand greyed out as done.
busy = together and any(run is not None and run.unstable for run in runs)
warm_label = (f"Warm up: time the {len(steps)} steps together" if not together
              else f"Time the {len(steps)} steps again" if busy else "Warmed up: every step timed together")
warm_up = warm.button(warm_label, key="story_warm", icon=":material/replay:" if busy
                      else ":material/local_fire_department:", disabled=together and not busy, width="stretch")
keys.bind({"ArrowRight": "story_next", "PageDown": "story_next", "ArrowLeft": "story_prev", "PageUp": "story_prev"})

arrived_by_next = st.session_state.pop(PENDING, False)
# Before any timing: a step reached by Next while an earlier one was still being timed names
# itself at once, rather than over the last step's body until its timing ends.
with st.container(key="story_heading"):  # one line at 1024 px (projector.css)
    st.subheader(f"Step {current + 1} of {len(steps)}: {steps[current].title}", anchor=False)
if warm_up:
    todo = list(range(len(steps)))
else:  # a step reached with Next runs on arrival, with the steps before it that have not run
    # (its speed-up is since step 1); one reached by a link waits for a click
    todo = [i for i in range(current + 1) if runs[i] is None] if arrived_by_next else []
timing, page = running.places(bool(todo))  # no faded last step under the timing
error = None
if todo:
    with timing.container():
        # A Next or Warm up click during a timing stopped it: this run times those steps again.
        running.forget_cancelled()
        _, error = running.run([specs[i] for i in todo], counts=problem.counts,
                               labels=[story.step_label(i, steps[i]) for i in todo],
                               title="Timing every step together" if warm_up else
                               f"Timing step{'s' * (len(todo) > 1)} {listed(i + 1 for i in todo)}")
    if error:
        runs = stored_runs()
        page = page.container()
    else:  # redraw, so that the buttons count what is left to run
        st.session_state["story_flash"] = f"{len(todo)} step{'s' * (len(todo) != 1)} timed and stored."
        st.rerun()
with page:
    if error:
        st.error(error, icon=":material/error:")
    running.show_cancelled()
    if flash := st.session_state.pop("story_flash", None):
        st.toast(flash, icon=":material/check_circle:")

    step, run = steps[current], runs[current]
    outcomes = story.outcomes(runs)
    outcome = outcomes[current]
    # In a box of one height (projector.css) whatever its lines: the chart under it moved by a
    # line from one step to the next, where a talk's eyes rest on it.
    words, number = st.container(key="story_top").columns([3, 2], vertical_alignment="top")
    with words:
        # The optimizer named where the speed-up is read when it is not the sidebar's: step 1 against
        # the Run page's eager (another optimizer, another cost per iteration) read as one figure off.
        tutorial = specs[0].optimizer.name
        st.caption(f"{step.origin} · strategy `{step.strategy}`"
                   + (f" · optimizer `{tutorial}` (see below)" if tutorial != problem.optimizer else ""))
        if run is not None and run.status == "ok" and current > 0 and outcome.over_previous is not None:
            over = outcome.over_previous
            if over.same_program:  # e.g. only the carry's type changed: XLA is handed the same program
                st.markdown(f"XLA sees **one program**, as at step {current} (fingerprint "
                            f"`{display.short_program(run.program)}`): the same speed, whatever the timings' noise.",
                            help=over.why)
            elif over.significant is False:
                # The two since-step-1 figures may differ (×71.5 here, ×98.9 there): say they do and why
                # that is still one speed, rather than leave the reader to square them.
                before, here = outcomes[current - 1].since_start, outcome.since_start
                both = (f" ({spread.times(here.value)} here, {spread.times(before.value)} there, within the timings' "
                        "noise)" if before is not None and here is not None else "")
                if over.untested:  # overlapping ranges of a few repeats: no finding of one speed
                    st.markdown(f"Not told apart from step {current}: {spread.TOO_FEW_REPEATS}{both}.", help=over.why)
                else:
                    st.markdown(f"The same speed as step {current}: {spread.NOT_SIGNIFICANT}{both}.", help=over.why)
            else:
                st.markdown(f"Over step {current}: {over.label}.", help=over.why)
    with number:
        if run is None:
            # Short: this column is a third of the page at 1024 px; the caption below says what Next does.
            st.info("Not timed yet: **Warm up** times every step.", icon=":material/hourglass_empty:")
        elif run.status != "ok":
            st.warning(f"{step.strategy} {run.status}: {md(run.error or '')}", icon=":material/warning:")
        elif outcome.since_start is None:  # timed, but step 1 has no finished run to compare with
            st.info("Its speed-up since step 1 shows once step 1 has run: **Warm up**.",
                    icon=":material/hourglass_empty:")
        else:
            ratio = outcome.since_start
            big = spread.times(ratio.value) if current == 0 or ratio.significant is not False else spread.WITHIN_NOISE
            st.html(f'<p class="story-speedup">{big}</p>')
            since = "the starting point" if current == 0 else f"{ratio.span} since step 1"
            st.html(f'<p class="story-range">{since}</p>')

    rows = pd.DataFrame(story.chart_rows(runs, current))
    done = [r for r in runs if r is not None and r.status == "ok"]
    ms = (min(spread.Spread.of_run(r, "per_iter_ms").low for r in done),
          max(spread.Spread.of_run(r, "per_iter_ms").high for r in done)) if done else None
    # No title above the chart: its axis says what it shows, and the room is the chart's.
    display.chart(bars.story_bars(rows, [story.step_label(i, s) for i, s in enumerate(steps)], ms, CHART_HEIGHT)
                  .properties(title=""), legend=None)

    if run is not None and run.status == "ok":
        notes = []
        if current > 0 and outcome.since_start is not None and not outcome.timed_with_start:
            notes.append("Timed apart from step 1, so the machine's load may differ between them: **Warm up** "
                         "times every step together")
        # Eager compiles nothing ahead: "compile 0.00 s (none), paid once" read as a free compile; and
        # a program loaded from a cache says what compiling it cost when it was made, not "0.00 s".
        made = cold_compiles.latest_for(store, run)
        if run.cache == "none":
            compiled = "nothing compiled ahead"
        elif run.cache in cold_compiles.CACHED:
            compiled = (f"loaded from {run.cache}; compiling it took {made.trace_lower_s + made.compile_s:.2f} s when "
                        f"it was made (run #{made.id}), paid once" if made is not None else
                        f"loaded from {run.cache}, compiled before any stored run")
        else:
            compiled = f"compile {run.trace_lower_s + run.compile_s:.2f} s, paid once"
        # The figures the bar and its whisker draw: pooled over one program's steps (this step's
        # own range beside a whisker reaching another step's slowest repeat read as two numbers).
        pooled = outcome.one_program and outcome.per_iteration is not None
        timed = outcome.per_iteration if pooled else spread.Spread.of_run(run, "per_iter_ms")
        notes.append(f"One iteration {spread.value_range(timed, 'ms')} over {run.iterations_run:,} iterations"
                     + (f" (the repeats of steps {listed(outcome.one_program)} together)" if pooled else "")
                     + f"; {compiled}")
        if outcome.one_program:
            # Said, so that a figure that moves when a later step of the same program is timed reads as pooling.
            steps_named = listed(outcome.one_program)
            notes.append(f"Steps {steps_named} ran one compiled program: their speed-ups pool all their repeats")
        if run.unstable:  # said where the number is read, not only on Compare
            notes.append(f"**{run.unstable[0].upper()}{run.unstable[1:]}**")
        st.caption(". ".join(notes) + ".")
    st.markdown(step.fixes)
    for key in step.pitfalls:
        st.markdown(f":material/bug_report: **{pitfall_notes.TITLES[key]}.** {pitfall_notes.SUMMARIES[key]}")
    if step.pitfalls:
        st.page_link("pages/under_the_hood/page.py", label="Run the pitfalls live: Under the hood",
                     icon=":material/bug_report:")
    if step.traced:
        st.markdown(":material/timeline: **See it happen.** Traced with JAX's profiler, one iteration of eager "
                    "launches dozens of small programs with gaps between them while Python dispatches the next; scan "
                    "launches one program for the whole loop, and its ops follow each other with few gaps.")
        st.page_link("pages/under_the_hood/page.py", label="One iteration traced: Under the hood, Inside one iteration",
                     icon=":material/timeline:")

    st.divider()
    st.caption(
        "The tutorial's levels one at a time, then this lab's faster ones, on the sidebar's problem. Every "
        f"step runs one algorithm and is compared by its time per iteration; step 1 runs at most "
        f"{story.SLOW_STEP_ITERATIONS} iterations, which show its cost per iteration as well as more would. "
        "**Next** (→, Page Down) adds a step and times it, with any step before it not timed yet (step 1, eager, "
        "takes several seconds); **Previous** (←, Page Up) goes back. **Warm up**, before a talk, times every step "
        "together, their repeats in turn, so that the machine's load at any moment lands on all of them alike; "
        "each Next then shows a stored run at once; where the machine was busy while they were timed, the same "
        "button times them again.")
    st.caption(settings.spec_summary(specs[1]))
    if tutorial != problem.optimizer:  # names from the catalog: code spans need no escaping
        refusing = next(spec.strategy for spec in specs if refusal(spec.strategy, problem.optimizer))
        st.caption(f":material/info: Every step runs the tutorial's optimizer, `{tutorial}` from its "
                   f"start `{specs[0].init}`, not the sidebar's `{problem.optimizer}` from `{problem.start}`: "
                   f"`{refusing}` cannot run it, and one algorithm for every step keeps the bars about compilation "
                   "alone.")
