"""ServiceThread: RocketMQ's background-service pattern (start / wakeup / wait_for_running /
shutdown) on a daemon thread."""
from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ServiceThread:
    """Subclasses implement run_once(); the loop waits wait_interval_s between rounds unless
    woken up. A failing round is logged and the loop goes on (a service never dies silently)."""

    wait_interval_s = 0.001

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    @property
    def is_stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wakeup.is_set():
            self._wakeup.set()

    def wait_for_running(self, interval_s: float) -> None:
        """Sleep up to interval_s, or until wakeup()/shutdown()."""
        if self._wakeup.wait(interval_s):
            self._wakeup.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:
        """Hook run after every wait (GroupCommitService swaps its request lists here)."""

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self.wait_for_running(self.wait_interval_s)
            if self._stopped.is_set():
                break
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - keep the service alive, say what happened
                self.errors += 1
                log.exception("%s round failed", self.name)
        try:
            self.on_shutdown()
        except Exception:  # noqa: BLE001
            log.exception("%s shutdown step failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError

    def on_shutdown(self) -> None:
        """Last work after the loop ends (flush what is left)."""

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stopped.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.1f s", self.name, timeout_s)
            self._thread = None
