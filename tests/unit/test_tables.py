"""The CLI's progress line: rewritten in place on a terminal, silent for scripts."""

from __future__ import annotations

import io

from claimsched.tables import StatusLine


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_status_line_is_rewritten_in_place_on_a_terminal_and_ended_once() -> None:
    out = Terminal()
    with StatusLine(out) as line:
        line.show("waiting: 1/20 done")
        line.show("waiting: 20/20")
    assert out.getvalue() == "\rwaiting: 1/20 done\rwaiting: 20/20" + " " * 4 + "\n"


def test_a_status_line_says_nothing_where_no_one_watches() -> None:
    out = io.StringIO()
    with StatusLine(out) as line:
        line.show("waiting: 1/20 done")
    assert out.getvalue() == ""
