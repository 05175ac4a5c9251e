"""The Run page's download of what a fit estimates (`core.results.estimates`): B and Sigma,
named by the data's columns, as a statistician who brought the counts wants them, and B
(with each column's latent variance) on the page under it.

The estimates come back with the runs a click made and are kept in the session for the
last click's runs only: the store never holds them (p x p matrices), so a run read from it,
made earlier or by someone else, has none to give, and the page says how to get them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.results import estimates
from core.results.result import RunResult
from pages.ui.text import md

_KEPT = "run_estimates"


def keep(results: list[RunResult]) -> None:
    """Hold the estimates of the runs a click just made, in place of the last click's."""
    st.session_state[_KEPT] = {result.id: result.estimates for result in results if result.estimates is not None}


def offer(shown: list[RunResult]) -> None:
    """A download of the shown runs' estimates: a converged run's where one is, else where a
    fit stopped, said so; a line saying how to get them where no shown run has them here."""
    kept = st.session_state.get(_KEPT, {})
    usable = [run for run in shown if run.status == "ok" and run.diverged_at is None]
    if not usable:
        return
    with_estimates = [run for run in usable if run.id in kept]
    if not with_estimates:
        st.caption(":material/download: The estimates (B and Sigma) come with a run made in this session, not with "
                   "one read from the store: **Run again** to download them.")
        return
    run = next((run for run in with_estimates if run.converged), with_estimates[0])
    found = kept[run.id]
    what = "B and Sigma" if found.covariance is not None else "B"
    about = estimates.about(run)
    # Made when clicked, not at every rerun of the page: at 1,209 columns writing Sigma's
    # 1.5 million numbers took 3 s.
    # The run and its data in the label: after new files are chosen, and before Run, the button
    # still offers the last run's, which read as the new data's.
    st.download_button(f"Download run \\#{run.id}'s estimates ({what}): {md(run.dataset)}",
                       lambda: found.archive(about), key="run_estimates_file",
                       file_name=estimates.archive_name(run.dataset, run.id), mime="application/zip",
                       icon=":material/download:",
                       help=f"from run #{run.id} ({run.strategy}): coefficients.csv (B, each covariate's effect on "
                            "each count column's log rate) and covariance.csv (Sigma, the latent log rates' "
                            "covariance), at the fit's final point; README.txt says how to read them"
                            + ("" if run.converged else "; it did not converge, so these are where it stopped, not "
                                                        "the optimum")
                            + ("" if found.covariance is not None else
                               f"; Sigma is kept for at most {estimates.MAX_COVARIANCE_COLUMNS:,} columns"))
    _preview(found, run)


def _preview(found: estimates.Estimates, run: RunResult) -> None:
    """B on the page, a row per count column, with each column's latent variance (Sigma's
    diagonal): what the fit says of the data, without unpacking a download."""
    table = pd.DataFrame(found.coef.T, index=pd.Index(found.column_names, name="count column"),
                         columns=list(found.covariate_names))
    if found.covariance is not None:
        table["Sigma (variance)"] = found.covariance.diagonal()
    without_value = found.without_value()
    if without_value:
        # Which entries are no estimates, by row (a warning names four columns a level), first:
        # last, it was cut at the table's right edge at 1024 px.
        table.insert(0, "no finite value", [", ".join(without_value.get(column, [])) for column in found.column_names])
        # Their rows first too: in the file's column order nine of oaks' 114 lay scattered down the table.
        table = table.sort_values("no finite value", key=lambda marks: marks.eq(""), kind="stable")
    with st.expander(f"What the fit estimates: B for {len(found.column_names):,} count columns, "
                     f"{len(found.covariate_names)} covariate column{'s' * (len(found.covariate_names) != 1)}",
                     icon=":material/table_view:"):
        # Without a constant (~ 0 + tree) a level has its own coefficient, against no reference.
        against = " (a factor's level against its reference)" if found.against_reference else ""
        st.caption(f"Run #{run.id}: each covariate's effect on each count column's log rate{against}, and the "
                   "variance of the column's latent log rate. "
                   + ("" if run.converged else "The fit did not converge: these are where it stopped. ")
                   + ("**no finite value** names a column's coefficients that drift without bound (it counts "
                      "nothing at a level of a factor, or on one side of a combination of covariates; their rows "
                      "first): they are where the fit stopped, not estimates"
                      + (", though the ELBO converged." if run.converged else ".") if without_value else ""))
        st.dataframe(table, key="run_estimates_table", height=300,
                     column_config={"no finite value": st.column_config.TextColumn(width="large")})
