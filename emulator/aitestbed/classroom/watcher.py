"""The instructor's page's thread: a Watcher takes a new Page every `interval` seconds
(collect, then summarize); the web page only renders the last one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from aitestbed.classroom.collect import Raw, collect, layout_of, stamp
from aitestbed.classroom.page import Page, empty_page
from aitestbed.classroom.roster import Room
from aitestbed.classroom.summary import summarize
from aitestbed.exercises.probe import Probe


def practice_room(user: str, uid: int, systems: list[str]) -> Room:
    """The room the page shows on a cluster without a classroom: its practice user."""
    return Room(prefix="", project="", project_gid=0, systems=list(systems),
                learners={user: uid}, created="")


class Watcher:
    """Takes a snapshot every `interval` seconds in a thread of its own; `page` is the last.

    `source` makes one Page from the previous cycle's Raw (or None); the real one is
    built from a cluster name (`for_cluster`)."""

    def __init__(self, cluster: str, source: Callable[[Raw | None], tuple[Raw, Page]],
                 interval: float = 5.0, clock: Callable[[], float] = time.time):
        self.cluster = cluster
        self.interval = max(float(interval), 0.5)
        self.clock = clock
        self._source = source
        self._lock = threading.Lock()
        self._page = empty_page(cluster, self.interval)
        self._raw: Raw | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cycles = 0

    @property
    def page(self) -> Page:
        with self._lock:
            return self._page

    def refresh(self) -> Page:
        """One cycle; a failure keeps the last page and says so on it."""
        try:
            raw, page = self._source(self._raw)
        except Exception as err:  # noqa: BLE001 - the page shows it, the thread goes on
            message = f"snapshot failed: {type(err).__name__}: {err}".splitlines()[0]
            with self._lock:
                kept = self._page
                page = Page(**{**kept.__dict__, "errors": [message]})
                self._page = page
            return page
        with self._lock:
            self._raw, self._page = raw, page
            self.cycles += 1
        return page

    def start(self) -> Watcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="classroom-watcher",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    @classmethod
    def for_cluster(cls, cluster: str, interval: float = 5.0,
                    probe: Probe | None = None) -> Watcher:
        """The watcher of a running cluster (AitestbedError when it has no state)."""
        from aitestbed.classroom import roster
        from aitestbed.exercises import catalog
        from aitestbed.exercises.session import Session

        session = Session(cluster, probe)
        layout = layout_of(session.topology, session.nodes)
        root = session.state.root

        def source(previous: Raw | None) -> tuple[Raw, Page]:
            raw = collect(cluster, layout, session.probe)
            raw.login_seen = stamp(previous.login_seen if previous else {}, raw.logins,
                                   raw.taken, first=previous is None)
            raw.since = previous.since if previous else raw.taken
            errors = []
            try:
                room = roster.load_room(root)
                load = roster.load_load(root)
            except roster.ClassroomError as err:
                room, load = None, None
                errors.append(str(err))
            if room is None:
                user, uid = session.record.user, 0
                try:
                    user, uid = session.learner(None)
                except Exception as err:  # noqa: BLE001 - shown on the page
                    errors.append(str(err))
                room = practice_room(user, uid, layout.systems)
            exercises = catalog.available(room.systems or list(layout.systems))
            records = {u: session.progress(u) for u in room.learners}
            page = summarize(raw, room, load, records, exercises, interval)
            page.errors = errors + page.errors
            return raw, page

        return cls(cluster, source, interval)
