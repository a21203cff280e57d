"""The GroqChips this process may use, asked of the node's tspd: what the GroqFlow facade calls.

    available_chips()          how many chips this process may use: its PBS job's cards on this
                               node; 0 outside a job or where no tspd answers
    with open_chips(n) as s:   lock n of them for a run (s.cards: their indices); the session
        ...                    ends on exit, or when the process dies (tspd reaps it)
A socket call happens only when a run starts and ends, never per inference.
"""

from __future__ import annotations

from aitestbed.groq.tspd.client import TspdClient, TspdError, TspdUnavailable

NO_RUNTIME = ("no GroqChip found: this host has no GroqCard service (tspd); run on a GroqNode "
              "(groq-r01-gn-01 .. groq-r01-gn-09) in a PBS job")


class ChipsUnavailable(RuntimeError):
    """The chips a run needs cannot be had here; the message says why and what to ask for."""


def available_chips() -> int:
    try:
        return len(TspdClient().visible())
    except (TspdError, OSError, ValueError, KeyError):
        return 0


class ChipSession:
    """A tspd session holding GroqChips of this process's job; a context manager."""

    def __init__(self, client: TspdClient, session: dict):
        self._client = client
        self.id: str | None = str(session["id"])
        self.cards: list[int] = [int(c) for c in session["cards"]]
        self.job: str | None = session.get("job")

    def close(self) -> None:
        if self.id is None:
            return
        session_id, self.id = self.id, None
        try:
            self._client.close_session(session_id)
        except (TspdError, OSError):
            pass  # tspd frees a dead process's cards anyway

    def __enter__(self) -> ChipSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChipSession(id={self.id!r}, cards={self.cards})"


def open_chips(num_chips: int) -> ChipSession:
    client = TspdClient()
    try:
        session = client.open_session(int(num_chips))
    except TspdUnavailable:
        raise ChipsUnavailable(NO_RUNTIME) from None
    except TspdError as err:
        raise ChipsUnavailable(str(err)) from None
    except OSError as err:
        raise ChipsUnavailable(f"no GroqChip found: tspd cannot be reached: {err}") from None
    return ChipSession(client, session)
