"""The PostgreSQL of a team vault goes down under a running daemon: every call that needs it fails with
STORE_UNAVAILABLE (retryable), naming the vault and host:port, where recall and remember hung 30 s and
answered INTERNAL, a write cut off mid-way answered INVALID_REQUEST and count answered a stale figure;
the panel's overview marks the vault instead of answering HTTP 500. Once the server is back, the same
daemon serves again."""

from __future__ import annotations

import http.client
import shutil
import threading

import pytest
from pg_fixtures import running_cluster

from hebbs.errors import StoreUnavailable

pytest_plugins = ["daemon_fixtures"]


def _overview(port: int, token: str) -> tuple[int, str]:
    """The panel's overview page, as a browser that opened the printed address gets it."""
    def get(path: str, cookie: str | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", f"127.0.0.1:{port}")
        if cookie:
            conn.putheader("Cookie", cookie)
        # What a browser sends when the person opens the address: the panel serves a cookie nothing else.
        conn.putheader("Sec-Fetch-Site", "none")
        conn.putheader("Sec-Fetch-Mode", "navigate")
        conn.endheaders()
        response = conn.getresponse()
        response.body = response.read().decode()  # type: ignore[attr-defined]
        conn.close()
        return response

    traded = get(f"/?token={token}").getheader("Set-Cookie")
    page = get("/", traded.split(";", 1)[0])
    return page.status, page.body  # type: ignore[attr-defined]


def test_a_store_down_is_a_typed_retryable_error_naming_the_server():
    from daemon_fixtures import DaemonHome, short_tmp, wait_until

    with running_cluster() as cluster:
        server = cluster.servers[0]
        where = f"127.0.0.1:{server.port}"
        home = DaemonHome(idle_timeout=0)
        folder = short_tmp("hbo")
        try:
            home.hebbs("init", str(folder), "--store", server.url, "--name", "outage")
            home.start()
            client = home.client(folder, autostart=False)
            client.remember("the office wifi password rotates every Monday")
            panel = home.palace()

            # Killed while a writer writes: its write fails typed, not as a wrong request.
            errors: list[BaseException] = []
            written: list[str] = []

            def writer() -> None:
                with home.client(folder, autostart=False) as mine:
                    try:
                        for n in range(100_000):
                            mine.remember(f"write {n} before the outage", key=f"w{n}", consolidate=False)
                            written.append(f"w{n}")
                    except BaseException as exc:  # noqa: BLE001 - the test reads it
                        errors.append(exc)

            thread = threading.Thread(target=writer)
            thread.start()
            wait_until(lambda: len(written) >= 5 or errors, what="writes before the kill")
            server.kill9()
            thread.join()
            assert len(errors) == 1 and isinstance(errors[0], StoreUnavailable), errors
            assert where in str(errors[0]) and "outage" in str(errors[0])

            for call in (lambda: client.recall("wifi password", top_k=3), lambda: client.remember("during"),
                         client.count):
                with pytest.raises(StoreUnavailable) as failed:
                    call()
                assert where in str(failed.value) and "'outage'" in str(failed.value)
            done = home.hebbs("recall", "wifi", "--vault", str(folder / ".hebbs"), check=False)
            assert done.returncode != 0 and "STORE_UNAVAILABLE" in done.stdout + done.stderr
            assert "Traceback" not in done.stderr and "INTERNAL" not in done.stdout + done.stderr

            status, page = _overview(panel["port"], panel["url"].split("token=", 1)[1])
            assert status == 200
            assert "cannot be reached" in page and where in page

            # Back: the same daemon serves again, nothing acknowledged before the kill lost.
            server.start()
            assert client.remember("after the outage").content == "after the outage"
            assert client.count() - 2 - len(written) in (0, 1)  # the write cut off may have committed
            client.close()
        finally:
            home.cleanup()
            shutil.rmtree(folder, ignore_errors=True)
