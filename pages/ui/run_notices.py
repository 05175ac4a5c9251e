"""What a session is told of a run that was cancelled or stopped, whichever of two threads says it first.

A click during a run (Cancel, Previous, another page, a new setting) stops the page's script,
and Streamlit starts the next script at once, in another thread, while the stopped one is
still unwinding: under load its `except` ran seconds after the new script had drawn the page.
So the new script says what happened to a run still marked under way (`pending`), and the
stopped run's own note (`stopped`) counts only where nothing has said it yet. A run whose
browser went (a closed tab, a lost connection) is not stopped but left to finish (`went_on`):
said should that browser come back to the session. Free of Streamlit: a session keeps one
`RunNotices` in its state (`pages.ui.running`).
"""

from __future__ import annotations

import uuid

STOPPED = "stopped by another click while it ran"


class RunNotices:
    """One session's runs, as far as a notice of their end needs: the latest run's token,
    its title while it is under way, how many of its runs are stored so far, the token of
    the last run whose end is accounted for, and the notice waiting to be shown."""

    def __init__(self) -> None:
        self.run: str | None = None
        self.under_way: str | None = None
        self.stored = 0
        self.said: str | None = None
        self.notice: str | None = None

    def started(self, title: str) -> str:
        """A run titled `title` begins; returns its token. A run before it still marked under
        way was stopped (its script's note has not come yet): said first."""
        self.pending_stop()
        self.run, self.under_way, self.stored = uuid.uuid4().hex, title, 0
        return self.run

    def progressed(self, token: str, stored: int) -> None:
        """The run `token` has stored `stored` runs so far."""
        if token == self.run:
            self.stored = stored

    def ended(self, token: str) -> None:
        """The run `token` returned or raised: no longer under way."""
        if token == self.run:
            self.under_way = None

    def cancelled(self, title: str) -> None:
        """A Cancel click on the latest run, titled `title`."""
        self.notice, self.said = _notice(title, "cancelled", self.stored), self.run

    def stopped(self, token: str, title: str) -> None:
        """The run `token`, titled `title`, was stopped by a click elsewhere: said unless the
        click's script said so already (Cancel, `pending_stop`) or does the work again (`redone`)."""
        if self.said != token:
            self.notice, self.said = _notice(title, STOPPED, self.stored if token == self.run else 0), token

    def went_on(self, token: str, title: str) -> None:
        """The run `token`, titled `title`, was left to finish when this session's browser went
        (a closed tab, a lost connection): said should the browser come back to this session,
        in place of anything said of it before."""
        self.notice, self.said = (f"{title}: went on after this page lost its connection to the browser; its runs "
                                  "are stored as they finish and show on Compare."), token

    def redone(self) -> None:
        """The latest run, stopped or cancelled, is being done again: nothing to say of it."""
        self.notice, self.said = None, self.run

    def pending_stop(self) -> None:
        """A run still marked under way while this script runs was stopped by the click that
        started this script: said now, before the stopped script's own note."""
        if self.under_way is not None:
            self.stopped(self.run, self.under_way)
            self.under_way = None

    def take(self) -> str | None:
        """The notice to show now, once: a stopped run's included."""
        self.pending_stop()
        notice, self.notice = self.notice, None
        return notice


def _notice(title: str, how: str, stored: int) -> str:
    if stored == 0:
        return f"{title}: {how}, before any run finished; nothing was stored."
    return (f"{title}: {how}; the {stored} run{'s' * (stored != 1)} that had finished "
            f"{'are' if stored != 1 else 'is'} stored, what was under way was not.")
