"""Compare: every stored run (all users, the command line, imports), side by side."""

from __future__ import annotations

import pathlib
import tempfile

import pandas as pd
import streamlit as st

from core import access as delete_rules
from core.charts import comparisons, lines
from core.charts.style import LABELS
from core.results import comparison, reach, stability
from core.store import cold_compiles
from core.store.run_store import IMPORTED, RESTORE_DAYS, StoreError
from pages.ui import clock, display, links, resources, sign_in, state
from pages.ui import upload as upload_widgets
from pages.ui.text import md, public

FILTERS = links.COMPARE_FILTERS
# What a run is and its timings first: at 1024 px the table shows its first five columns.
TABLE = ["id", "strategy", "time_to_solution_s", "per_iter_ms", "dataset", "source", "optimizer", "init",
         "iterations_run", "precision", "device", "status", "unstable", "run_s", "run_s_min", "run_s_max", "compile_s",
         "first_call_s", "cache", "final_elbo", "n", "p", "device_kind", "warning_count", "created", "host",
         "git_commit"]
# Settings a difference in which explains a difference in timings.
SETTINGS = ["strategy", "dataset", "n", "p", "d", "precision", "device", "device_kind", "iterations", "optimizer",
            "lr", "init", "repeats", "tol", "cache", "jax_version", "jaxlib_version", "cpu_count", "host", "git_commit",
            "cpu_model"]
GROUPS = ["strategy", "dataset", "device", "precision", "device_kind", "optimizer", "init", "host", "jax_version",
          "git_commit"]
METRICS = LABELS
MAX_CURVES = 12
# The ELBO curves' optimizer box's choice that draws every optimizer's runs together.
ALL_OPTIMIZERS = "all, overlaid"
# Rows of the table (and so of everything below it): a shared store only grows, and every
# click here sends the table to the browser; the filters reach older runs.
TABLE_ROWS = 500
# The runs table's height beyond its 35 px rows: the header row, the borders, and room for the
# horizontal scrollbar its many columns bring at 1024 px (without it, the last row was cut).
TABLE_CHROME_PX = 38 + 16
# Rows the table shows before it scrolls, whole (a row cut at the bottom edge read as lost).
TABLE_VISIBLE_ROWS = 10
COLUMNS = {
    **display.TABLE_COLUMNS,
    # Pinned: the table scrolls sideways in a narrow window, and a row without its number says little.
    "id": st.column_config.NumberColumn("run", format="#%d", pinned=True),
    "unstable": st.column_config.CheckboxColumn("unstable", help="timed while other processes took more than a "
                                                "quarter of the usable cores: its timings carry their load"),
    "git_commit": st.column_config.TextColumn("commit", help="the project's git commit that measured the run"),
    # XLA's part alone (Run's "compile or load (s)" adds tracing and lowering): named so, not "compile_s".
    "compile_s": st.column_config.NumberColumn("XLA compile (s)", format="%.3f",
                                               help="XLA's compile alone, without tracing and lowering; about 0 "
                                                    "for an executable loaded from memory"),
    "created": st.column_config.DatetimeColumn("created (UTC)", format="YYYY-MM-DD HH:mm"),
    "device_kind": st.column_config.TextColumn("device kind"),
    "n": st.column_config.NumberColumn("n", format="%d"),
    "iterations": st.column_config.NumberColumn("iterations cap", format="%d",
                                                help="the most iterations the run could take (the sidebar's "
                                                     "Iterations); it stops sooner at its tolerance"),
    # Tolerances are powers of ten: 1e-07 reads at once where 0.0000001 needs counting.
    "tol": st.column_config.NumberColumn("tol", format="%.0e"),
    "lr": st.column_config.NumberColumn("lr", format="%g"),
    "source": st.column_config.TextColumn("source", help="imported: measured elsewhere and dated by whoever wrote "
                                                         "the file; never the headline of Run, Story or solve"),
    "warning_count": st.column_config.NumberColumn("warnings", format="%d", width="small",
                                              help="what a reader of the run's numbers must know (data changed to be "
                                                   "fitted, float32 accuracy): tick the run to read them"),
}
MIME = {".csv": "text/csv", ".json": "application/json", ".parquet": "application/octet-stream"}
# Columns whose values vary in length from run to run ("oaks x1", "oaks x100"): the grid sizes
# a column by its first rows and clips a longer value below them without an ellipsis.
TEXT_COLUMNS = ("strategy", "optimizer", "dataset", "n", "precision", "device", "device_kind", "cache", "status",
                "source", "host")
# The grid's 14 px text: about 8 px a character, plus the cell's padding and sort arrow.
CHAR_PX, CELL_PADDING_PX = 8, 34


def fitted_columns(frame: pd.DataFrame) -> dict:
    """COLUMNS, with each of TEXT_COLUMNS in `frame` as wide as its longest value or header."""
    columns = dict(COLUMNS)
    for name in TEXT_COLUMNS:
        if name in frame:
            config = columns.get(name) or st.column_config.Column(name)
            header = config.get("label") or name
            # No rows (filters that match no run): no value to measure, and max() of none is NaN.
            lengths = frame[name].dropna().astype(str).str.len()
            longest = max(len(header), int(lengths.max()) if not lengths.empty else 0)
            columns[name] = {**config, "width": CELL_PADDING_PX + CHAR_PX * longest}
    return columns

st.title("Compare stored runs", anchor=False)
st.caption("Every run in the shared store: from this dashboard, from `python -m core`, or imported from "
           "other machines.")
store = resources.store_or_stop()
state.default("cmp_version", 0)  # bumped after a delete, so the table's selection starts afresh


def clear_filters(columns: list[str]) -> None:
    """Every filter box of `columns` back to "all" (a callback: before the boxes are drawn again)."""
    for column in columns:
        st.session_state[f"cmp_f_{column}"] = []


def recently_deleted_section() -> None:
    """Deleted runs, restorable until they are purged (`RunStore.RESTORE_DAYS`)."""
    deleted = store.deleted(limit=200)
    if not deleted:
        return
    # Kept open once a run is picked: picking reruns the page, and the box folded over its Restore.
    with st.expander(f"Recently deleted ({len(deleted)})", icon=":material/restore_from_trash:",
                     expanded=bool(st.session_state.get("cmp_restore_ids"))):
        st.caption(f"Deleted runs are hidden from every page and purged {RESTORE_DAYS} days after they were deleted.")
        labels = {run.id: f"#{run.id} {run.strategy} · {run.dataset} · {run.precision} (deleted "
                          f"{pd.Timestamp(when, unit='s'):%Y-%m-%d %H:%M} UTC)" for run, when in deleted}
        # Options are shown as plain text, never markdown: no escaping (it would show its backslashes).
        chosen = st.multiselect("Runs to restore", list(labels), format_func=labels.get,
                                key="cmp_restore_ids", placeholder="pick runs")
        # Restoring takes what deleting takes: a session could bring back any run another had
        # deleted, password or not.
        rule = who_may(chosen) if chosen else "confirm"
        if rule == "off":
            st.caption(":material/lock: Restoring runs made by others is turned off on this server, as deleting them "
                       "is (PLNLAB_ALLOW_DELETE); you can restore the runs you made.")
        # A form: the password goes with the click however the button is reached (typed, then
        # Tab to the field's eye and a click, it stayed in the browser: "wrong password").
        with st.form("cmp_restore_form", border=False, enter_to_submit=True):
            guess = sign_in.password_field("cmp_restore_password", "restore runs made by others") \
                if rule == "password" else None
            clicked = st.form_submit_button("Restore", key="cmp_restore", icon=":material/restore:",
                                            disabled=not chosen or rule == "off")
        if clicked:
            refused = sign_in.refusal(guess) if rule == "password" else None
            if refused:
                sign_in.say_refused(refused, "Nothing was restored.")
                return
            restored = store.restore(chosen)
            st.session_state["cmp_version"] += 1
            st.toast(f"Restored {restored} run{'s' * (restored != 1)}.", icon=":material/restore:")
            st.rerun()


def who_may(run_ids: list[int]) -> str:
    """What deleting, or restoring, `run_ids` takes of this session (`core.access.deletion`),
    read from the store now; "off" with the reason shown where the server's setting is mistyped."""
    try:
        # Whose runs these are is read from the store now, not remembered: ids are never reused.
        owner = sign_in.identity()
        return delete_rules.deletion(run_ids, store.owned(run_ids, owner), sign_in.password(),
                                     signed_in=owner.startswith("user:"))
    except ValueError as exc:  # a mistyped PLNLAB_ALLOW_DELETE on the server
        st.error(str(exc), icon=":material/error:")
        return "off"


def import_section() -> None:
    with st.expander("Import runs from a file (.json, .csv or .parquet from `python -m core export`)",
                     icon=":material/upload:"):
        upload = st.file_uploader("Runs file", type=["json", "csv", "parquet"], key="cmp_import",
                                  max_upload_size=upload_widgets.largest_upload_mb())
        if st.button("Import", key="cmp_import_go", disabled=upload is None):
            try:  # from memory, under the name the user picked: no server path in any message
                done = store.import_bytes(upload.getvalue(), pathlib.Path(upload.name).name)
            except StoreError as exc:
                st.error(f"Nothing imported: {public(exc)}", icon=":material/error:")
                return
            # Redraw, so that the table and the sidebar count show the new runs.
            st.session_state["cmp_flash"] = (md(done.summary()) + ".", md(done.refusals()))
            st.rerun()


if flash := st.session_state.pop("cmp_flash", None):
    imported, refused = flash
    st.success(imported, icon=":material/check_circle:")
    if refused:
        st.warning(refused[0].upper() + refused[1:], icon=":material/block:")
frame = store.frame()
if frame.empty:
    st.info("No runs stored yet. Run some strategies first, or import a runs file below.",
            icon=":material/inbox:")
    st.page_link("pages/run/page.py", label="Go to the Run page", icon=":material/play_arrow:")
    import_section()
    recently_deleted_section()
    st.stop()

# --- filter and pick -----------------------------------------------------------------------
# No empty choice: it shows as a blank chip (runs stored before a field was kept have none); no
# box without a choice at all (a commit where the project is no git clone).
offered = {column: sorted(value for value in frame[column].dropna().astype(str).unique() if value.strip())
           for column in FILTERS}
offered = {column: options for column, options in offered.items() if options}
# Three to a row: at 1024 px a box of a quarter of the page cut its second chip to "ji…".
FILTER_ROW = 3
boxes = [box for start in range(0, len(offered), FILTER_ROW) for box in st.columns(FILTER_ROW)][:len(offered)]
for (column, options), widget in zip(offered.items(), boxes):
    key = f"cmp_f_{column}"
    # Drop choices the store no longer has; only then, as assigning the key makes the
    # browser take this run's value over one picked while the page was rerunning.
    chosen = st.session_state.get(key, [])
    still_stored = [v for v in chosen if v in options]
    if still_stored != chosen:
        st.session_state[key] = still_stored
    widget.multiselect(FILTERS[column], options, key=key, persist_state="session", placeholder="all")
mask = frame.index == frame.index
for column in offered:
    wanted = st.session_state.get(f"cmp_f_{column}") or []
    if wanted:
        mask &= frame[column].astype(str).isin(wanted)
matching = int(mask.sum())
view = frame[mask].head(TABLE_ROWS).reset_index(drop=True)  # the frame is newest first
view["source"] = view["owner"].eq(IMPORTED).map({True: "imported", False: "measured here"})
# Short, and blank for runs stored before the commit was kept (a cell would read "None").
view["git_commit"] = view["git_commit"].fillna("").astype(str).str[:10]
# Timed while other processes took more than a quarter of the cores (`core.results.stability`).
view["unstable"] = pd.to_numeric(view["others_cpu_share"], errors="coerce") > stability.BUSY_SHARE

# Runs ticked in a link, ticked again in the table the first time it is drawn in this session.
from_link = st.session_state.pop("cmp_ticked", None) if not st.session_state.get("cmp_table_drawn") else None
ticked_default = None
if from_link:
    positions = [int(i) for i in view.index[view["id"].isin(from_link)]]
    ticked_default = {"selection": {"rows": positions}}
st.session_state["cmp_table_drawn"] = True
event = display.table(view[[c for c in TABLE if c in view]], key=f"cmp_table_{st.session_state['cmp_version']}",
                      on_select="rerun", selection_mode="multi-row", hide_index=True,
                      column_config=fitted_columns(view),
                      height=TABLE_CHROME_PX + 35 * min(TABLE_VISIBLE_ROWS, max(1, len(view))),
                      selection_default=ticked_default)
# Positions in `view`; a tick made before the filters changed may point past its end.
rows = [r for r in (event.selection.rows if event is not None else []) if r < len(view)]
picked = view.iloc[rows] if rows else view
links.write("compare", "ticked", sorted(int(i) for i in view.iloc[rows]["id"]))
shown = f"{len(view):,} of {len(frame):,} runs shown" if matching <= TABLE_ROWS else \
    f"The newest {len(view):,} of {matching:,} matching runs ({len(frame):,} stored) shown: filter to reach older ones"
if matching:
    st.caption(f"{shown}; click a column header to sort. "
               + (f"**{len(rows)} ticked**: the charts below compare them." if rows else
                  "Tick rows (left edge) to compare just those; until then the charts use every run shown."))
if rows and "warning_count" in picked:
    for run_id in picked.loc[picked["warning_count"] > 0, "id"].head(10):
        for warning in store.get(int(run_id)).warnings:
            st.warning(f"#{int(run_id)}: {md(warning)}", icon=":material/warning:")
    for run_id in picked.loc[picked["unstable"], "id"].head(10):
        st.warning(f"#{int(run_id)}: {md(store.get(int(run_id)).unstable)}", icon=":material/speed:")
unfinished = picked["status"].isin(["interrupted", "timed_out"])
if count := int(unfinished.sum()):
    st.caption(f"{count} interrupted or timed-out run{'s' * (count != 1)} (stopped before finishing: no whole "
               "timings) left out of the charts.")
    picked = picked[~unfinished]
if picked.empty:
    st.info("No finished run matches these filters." if matching else
            f"No run matches these filters ({len(frame):,} stored).", icon=":material/filter_alt_off:")
    # One click back to every run: a filter's chips come off one at a time otherwise.
    st.button("Clear the filters", key="cmp_clear_filters", icon=":material/filter_alt_off:",
              on_click=clear_filters, args=(list(offered),))
    recently_deleted_section()
    st.stop()

# --- charts --------------------------------------------------------------------------------
st.header("ELBO curves")
# One problem at a time: curves of different data sit orders of magnitude apart, and
# overlaid they read as one strategy beating another.
problems = picked.sort_values("created_at", ascending=False).drop_duplicates(list(comparison.PROBLEM))
problem_labels = {int(r.id): f"{r.dataset} ({r.n:,} x {r.p:,})" for r in problems.itertuples()}
problem_box, optimizer_box = st.columns(2)
if len(problem_labels) > 1:
    if st.session_state.get("cmp_elbo_problem") not in problem_labels:
        st.session_state["cmp_elbo_problem"] = next(iter(problem_labels))
    problem_box.selectbox("Problem", list(problem_labels), key="cmp_elbo_problem", format_func=problem_labels.get,
                          help="the curves of one data set and size at a time; the newest run's first")
    one_problem = picked[comparison.same_problem(picked, st.session_state["cmp_elbo_problem"])]
else:
    one_problem = picked
# One optimizer at a time by default, the newest run's: different algorithms meet only at the
# optimum, and on one axis the tutorial's 500 iterations flattened L-BFGS's 49 into a stub in
# a corner. Overlaid on request (against time, that is how algorithms compare).
curve_optimizers = (one_problem.sort_values("created_at", ascending=False)["optimizer"].astype(str)
                    .drop_duplicates().tolist())
if len(curve_optimizers) > 1:
    if st.session_state.get("cmp_elbo_optimizer") not in [*curve_optimizers, ALL_OPTIMIZERS]:
        st.session_state["cmp_elbo_optimizer"] = curve_optimizers[0]
    optimizer_box.selectbox("Optimizer", [*curve_optimizers, ALL_OPTIMIZERS], key="cmp_elbo_optimizer",
                            help="the curves of one optimizer at a time, the newest run's first, or every "
                                 "optimizer's overlaid: different algorithms, whose curves meet only at the optimum")
    if st.session_state["cmp_elbo_optimizer"] != ALL_OPTIMIZERS:
        one_problem = one_problem[one_problem["optimizer"].astype(str) == st.session_state["cmp_elbo_optimizer"]]
newest = one_problem.sort_values("created_at", ascending=False).head(MAX_CURVES)
# Rows of the frame and the curves as arrays: a long curve costs one read, not a Python
# float per point, and is thinned before it is drawn.
results = sorted(newest.itertuples(), key=lambda r: r.id)  # legends in run order
optimizers = sorted({str(r.optimizer) for r in results})
others = len(curve_optimizers) - len(optimizers)
# Named by what sets the curves apart (optimizer, precision, ...): "#1 scan" beside "#4 scan" said nothing.
names = comparison.run_names(newest)
labels = [names[int(r.id)] for r in results]
# A program loaded from a cache starts where compiling it started when it was made, as on Run.
made_by = cold_compiles.makers(store, [run for row in results if row.cache in cold_compiles.CACHED
                                       for run in store.find(id=int(row.id))])
curves = display.elbo_long(results, labels, curves=store.curves([int(i) for i in newest["id"]]),
                           compiled_when_made=cold_compiles.paid_when_made(made_by))
# Legends under the curves: on the right, a dozen labels such as "#14 scan_pytree_class ·
# preconditioned_lbfgs" left the plot 190 px wide at 1024 px.
by_iteration, by_time = st.tabs(["against iteration", "against time (estimated)"])
with by_iteration:
    display.chart(lines.elbo_curves(curves, x="iteration", height=340),
                  "log(-ELBO) per iteration; runs of one problem and one optimizer should overlap."
                  + lines.coinciding_note(curves)
                  + (f" {len(optimizers)} optimizers here ({', '.join(map(md, optimizers))}): different algorithms, "
                     "whose curves meet only at the optimum." if len(optimizers) > 1 else "")
                  + (f" The {MAX_CURVES} newest of {len(one_problem)} runs." if len(one_problem) > MAX_CURVES else "")
                  + (f" {len(problem_labels) - 1} other problem{'s' * (len(problem_labels) > 2)} in the box above."
                     if len(problem_labels) > 1 else "")
                  + (f" {others} other optimizer{'s' * (others > 1)} in the box above." if others else ""),
                  legend="bottom")
with by_time:
    drawn = st.container()
    x = clock.choose(curves, key="cmp_clock")
    with drawn:
        display.chart(lines.elbo_curves(curves, x=x, height=340), clock.caption(x, curves), legend="bottom")

st.header("Grouped timings")
state.default("cmp_group", list(comparison.DEFAULT_GROUPS))
# Time to solution heads the list where runs have one (they stopped at a tolerance).
solved = picked["time_to_solution_s"].notna().any()
state.default("cmp_metric", "time_to_solution_s" if solved else "per_iter_ms")
# Not "run_s" where there is no time to solution: whole runs of 40 and of 500 iterations
# divided by each other said ×8.5 for a ×106 difference per iteration.
state.default("cmp_metric_ratio", "time_to_solution_s" if solved else "per_iter_ms")
# A new set of runs none of which has a time to solution (the story's, of a fixed number of
# iterations) leaves that timing for the default one: kept, every chart below said only "no
# time to solution". A choice made among the same runs stays.
ids = sorted(int(i) for i in picked["id"])
among = st.session_state.get("cmp_baseline_among")
ratio_timing_reset = False
if not solved and among is not None and among != ids:
    for timing_key in ("cmp_metric", "cmp_metric_ratio"):
        if st.session_state.get(timing_key) == "time_to_solution_s":
            st.session_state[timing_key] = "per_iter_ms"
            ratio_timing_reset |= timing_key == "cmp_metric_ratio"
# A link may name columns or timings this version does not offer: keep the ones it does.
if [g for g in st.session_state["cmp_group"] if g in GROUPS] != st.session_state["cmp_group"]:
    st.session_state["cmp_group"] = [g for g in st.session_state["cmp_group"] if g in GROUPS]
for timing_key in ("cmp_metric", "cmp_metric_ratio"):
    if st.session_state.get(timing_key, "per_iter_ms") not in METRICS:
        st.session_state[timing_key] = "per_iter_ms"
# The columns on a row of their own: at 1024 px four of them in a column beside Timing were cut
# ("precision" read "p").
by = st.multiselect("Group by", GROUPS, key="cmp_group", persist_state="session", placeholder="choose columns",
                    help="runs of different sizes differ for reasons other than compiling: keep dataset first; "
                         "optimizers run different algorithms: keep optimizer; a float64 fit is another problem "
                         "than a float32 one: keep precision")
metric = st.columns(2)[0].selectbox("Timing", list(METRICS), key="cmp_metric", persist_state="session",
                                   format_func=METRICS.get)
if by:
    # Columns every run shares split nothing: said once in the caption, not on every label.
    labelled, shared = comparison.labelling_columns(picked, by)
    same = ("" if not shared else " Every run here has the same " + ", ".join(
        f"{column} ({md(value)})" for column, value in shared.items()) + ", left out of the labels.")
    unmeasured = comparison.unmeasured_groups(picked, labelled, metric)
    left_out = ""
    if unmeasured:
        names = ", ".join(unmeasured[:6]) + (f" and {len(unmeasured) - 6} more" if len(unmeasured) > 6 else "")
        why = (" (none of their runs converged: a fixed number of iterations, or its cap reached first)"
               if metric == "time_to_solution_s" else "")
        left_out = f" Left out, with no {METRICS[metric].rsplit(' (', 1)[0]}{why}: {md(names)}."
    mixing = "" if "optimizer" in by else " A group holding runs of several optimizers (algorithms) says so."
    display.chart(comparisons.grouped_summary(picked, labelled, metric),
                  f"Median (dot) of the runs' {METRICS[metric]}, and the range (line) from the fastest to the "
                  f"slowest repeat of any run in the group; diverged runs are left out of both, and a group of "
                  f"diverged runs alone is a row with its count and no dot.{same}{mixing}{left_out}",
                  legend=None)
else:
    st.info("Choose at least one column to group by.")

st.header("Time to reach the best stored ELBO")
state.default("cmp_within", 1e-5)
within = st.select_slider("Within (relative)", [1e-3, 1e-4, 1e-5, 1e-6, 1e-7], key="cmp_within",
                          persist_state="session", format_func=lambda v: f"{v:g}",
                          help="how close to the best ELBO stored for the same data counts as solved")
described = comparison.run_names(picked)
reached = reach.reach_frame(picked.head(40), store.curves([int(i) for i in picked["id"].head(40)]),
                            reach.best_by_problem(frame), within)
reached["label"] = reached["id"].astype(int).map(described)
never = comparisons.reach_labels(reached[reached["iterations_to"].isna()]).tolist()
shown = ", ".join(never[:6]) + (f" and {len(never) - 6} more" if len(never) > 6 else "")
never_note = f" Never within {within:g}: {md(shown)}." if never else ""
display.chart(comparisons.reach_bars(reached, within),
              f"Iterations until each run's ELBO came within {within:g} of the best final ELBO stored for its data "
              "(any strategy, optimizer or precision), at its steady-state time per iteration: an estimate from "
              f"one timed run, not a timing of its own.{never_note}", legend=None)

st.header("Relative to a baseline run")
finished = picked[picked["status"] == "ok"] if "status" in picked else picked
if finished.empty:
    # A baseline chosen among runs that all diverged was then refused by the chart below it.
    st.info("None of these runs finished (each diverged, was interrupted or timed out): there is no speed to "
            "divide by. Tick a finished run in the table above, or widen the filters.", icon=":material/info:")
else:
    # A new set of runs (rows ticked or unticked, filters changed) gets its own default baseline: a
    # pin kept from the whole table's runs was once a run with no value of the timing, so the
    # ratios drew nothing. A pin made among these runs, or read from a link on the first draw,
    # stays. (The timing's box below holds its default already.)
    repinned = False
    if st.session_state.get("cmp_baseline") not in ids or (among is not None and among != ids):
        pinned_before = st.session_state.get("cmp_baseline")
        st.session_state["cmp_baseline"] = comparison.default_baseline(picked, st.session_state["cmp_metric_ratio"])
        repinned = among is not None and pinned_before != st.session_state["cmp_baseline"]
    st.session_state["cmp_baseline_among"] = ids
    # The baseline across the column: a run's name grows with what sets it apart from the others.
    baseline = st.selectbox("Pinned baseline", ids, key="cmp_baseline", persist_state="session",
                            format_func=described.get, help="only runs of the same problem size are divided by it")
    st.columns(2)[0].selectbox("Timing", list(METRICS), key="cmp_metric_ratio", persist_state="session",
                               format_func=METRICS.get)
    ratio_metric = st.session_state["cmp_metric_ratio"]
    if repinned or ratio_timing_reset:
        # Said: the runs changed (ticks, filters) and the page chose for them; unannounced, it read as a bug.
        st.caption("For the runs now shown, "
                   + " and ".join(part for part in (
                       f"the baseline is {md(described[baseline])} (the newest eager run of the newest problem "
                       "among them, or that problem's slowest run where none is eager)" if repinned else "",
                       f"the timing is {METRICS[ratio_metric]} (none of them has a time to solution)"
                       if ratio_timing_reset else "") if part)
                   + ": pin others above.")
    alike = picked[comparison.same_problem(picked, baseline)]
    ratio_runs = alike.head(40)
    if baseline not in set(ratio_runs["id"]):
        ratio_runs = pd.concat([ratio_runs, alike[alike["id"] == baseline]])
    others = len(picked) - len(alike)
    untimed = int((~(pd.to_numeric(ratio_runs[ratio_metric], errors="coerce") > 0)
                   & (ratio_runs["status"] != "diverged")).sum())
    # A float32 run over a float64 baseline is two changes at once: said, as a ratio reads as compiling's alone.
    base_precision = str(alike.loc[alike["id"] == baseline, "precision"].iloc[0]) if "precision" in alike else ""
    other_precisions = sorted(set(ratio_runs.get("precision", pd.Series(dtype=str)).astype(str)) - {base_precision})
    # Each run named as in the charts above, by what sets it apart ("#13 scan · float64").
    display.chart(comparisons.ratio_bars(ratio_runs.assign(label=ratio_runs["id"].astype(int).map(described)), baseline,
                                         ratio_metric),
                  f"Each run's {METRICS[ratio_metric]} divided by the baseline's: below ×1 is faster; whisker: a 95% "
                  "bootstrap interval of the ratio (the repeats' range for runs stored without each repeat); within "
                  "noise: no significant difference by a Mann–Whitney U test on the stored repeats; not told apart: "
                  "too few repeats for that test, and their ranges overlap; same program: "
                  "XLA compiled one program for both, so they run at one speed."
                  + (f" {others} run{'s' * (others != 1)} of other problem sizes left out: pin one of theirs to "
                     "compare them." if others else "")
                  + (f" {untimed} run{'s' * (untimed != 1)} with no {METRICS[ratio_metric].rsplit(' (', 1)[0]} "
                     "left out." if untimed else "")
                  + (f" The baseline is {base_precision}: the {' and '.join(other_precisions)} runs' ratios hold "
                     "what the precision changes too, not only how the fit was compiled (Group by precision above, "
                     "or pin a run of theirs)." if other_precisions else ""), legend=None)

    # Any finished run of the same problem with this timing tested again against the baseline, from
    # the repeats stored with it (a run without the timing, e.g. no time to solution, has nothing to
    # test; a diverged one timed a fit that stopped early).
    timed = alike[pd.to_numeric(alike[ratio_metric], errors="coerce") > 0] if ratio_metric in alike else alike
    timed = timed[timed["status"] == "ok"] if "status" in timed else timed
    testable = [int(i) for i in timed["id"] if int(i) != baseline]
    if testable:
        if st.session_state.get("cmp_retest") not in testable:
            st.session_state["cmp_retest"] = testable[0]
        other = st.selectbox("Test a run against the baseline", testable, key="cmp_retest",
                             format_func=described.get,
                             help="a Mann–Whitney U test (two-sided, p < 0.05, as asv compare uses) on the two runs' "
                                  "stored repeats of this timing; with too few repeats for it, whether their ranges "
                                  "are apart")
        st.markdown(comparison.retest(alike[alike["id"] == other].iloc[0], alike[alike["id"] == baseline].iloc[0],
                                      ratio_metric))

st.header("Settings that differ")
varying = [c for c in SETTINGS if c in picked and picked[c].astype(str).nunique() > 1]
if len(picked) < 2:
    st.caption("Pick two or more runs to see how their settings differ.")
elif varying == ["strategy"]:  # a table of one column said less than this line
    st.caption("Only the strategy differs: every other setting and environment field is the same, so their "
               "timings differ by how the fit was compiled, and by run-to-run noise.")
elif varying:
    # The data's name last: a long one (an upload's files) pushed the settings that differ past
    # the table's right edge at 1024 px. A tolerance of 0 as 0, not "0e+0".
    shown = [c for c in varying if c not in ("id", "dataset")] + (["dataset"] if "dataset" in varying else [])
    differ = picked[["id", *shown]]
    if "tol" in shown:
        differ = differ.assign(tol=differ["tol"].map(lambda tol: f"{tol:.0e}" if tol else "0"))
    display.table(differ, hide_index=True, column_config={**fitted_columns(picked),
                                                          "tol": st.column_config.TextColumn("tol")})
    st.caption("Only the settings and environment fields whose values are not the same in every run.")
else:
    st.caption("These runs share every setting and environment field: differences are run-to-run noise.")

# --- manage --------------------------------------------------------------------------------
st.header("Export, import, delete")
left, right = st.columns([1, 3], vertical_alignment="bottom")
suffix = left.selectbox("Format", list(MIME), key="cmp_format", persist_state="session",
                        help=".json and .parquet keep the ELBO curves; all three import back")


def export_bytes(run_ids: list[int], suffix: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="plnlab-export-") as folder:
        path = pathlib.Path(folder) / f"runs{suffix}"
        store.export(path, run_ids)
        return path.read_bytes()


right.download_button(f"Download {len(ids)} run{'s' * (len(ids) != 1)} ({'ticked' if rows else 'shown'})",
                      data=lambda: export_bytes(ids, suffix), file_name=f"plnlab-runs{suffix}",
                      mime=MIME[suffix], on_click="ignore", icon=":material/download:", key="cmp_download")
import_section()

if rows:
    pending = st.session_state.get("cmp_delete")
    rule = who_may(ids)
    if rule == "off":
        st.caption(":material/lock: Deleting runs made by others is turned off on this server "
                   "(PLNLAB_ALLOW_DELETE); you can delete the runs you made.")
    elif pending != ids:
        if st.button(f"Delete {len(ids)} ticked run{'s' * (len(ids) != 1)}…", key="cmp_delete_ask",
                     icon=":material/delete:"):
            st.session_state["cmp_delete"] = ids
            st.rerun()
    else:
        one = len(ids) == 1
        whose = ("yours" if one else "your runs") if rule == "confirm" else sign_in.not_yours(one)
        st.warning(f"Delete run{'s' * (not one)} {', '.join(f'#{i}' for i in ids)} ({whose}) from the shared store, "
                   f"for every user? {'It' if one else 'They'} can be restored for {RESTORE_DAYS} days (Recently "
                   "deleted, at the bottom of this page).", icon=":material/warning:")
        # Only runs of others need the password again (`core.access.deletion`). In a form, so that
        # the password goes with the click however the button is reached.
        with st.form("cmp_delete_form", border=False):
            guess = sign_in.password_field("cmp_delete_password", "delete runs") if rule == "password" else None
            yes, no = st.columns([2, 5])  # at 1024 px a narrower column broke "Yes, delete" over two lines
            clicked = yes.form_submit_button("Yes, delete", type="primary", key="cmp_delete_yes")
            cancelled = no.form_submit_button("Cancel", key="cmp_delete_no")
        refused = sign_in.refusal(guess) if clicked and rule == "password" else None
        if refused:
            sign_in.say_refused(refused, "Nothing was deleted.")
        elif clicked:
            deleted = store.delete(ids)
            st.session_state["cmp_delete"] = None
            st.session_state["cmp_version"] += 1
            links.write("compare", "ticked", [])
            st.toast(f"Deleted {deleted} run{'s' * (deleted != 1)}; Recently deleted (at the bottom of this page) "
                     f"restores {'them' if deleted != 1 else 'it'}.",
                     icon=":material/delete:")
            st.rerun()
        if cancelled:
            st.session_state["cmp_delete"] = None
            st.rerun()

recently_deleted_section()
