"""Bad input at the protocol edge: every malformed frame gets INVALID_REQUEST (or another named
error), never INTERNAL, never a traceback in the log, never a client's payload logged whole; and
the connection that sent it stays usable."""

from __future__ import annotations

import random
import shutil

import pytest
from daemon_harness import ForegroundDaemon, final_reply, five_shapes, frame, random_frame, raw_connect

from hebbs.protocol import BadRequest, decode_request

FUZZ_SEED = 12
FUZZ_FRAMES = 3000
# Codes a malformed request may fairly get: each names what is wrong. INTERNAL is never one of them.
FAIR = {"OK", "INVALID_REQUEST", "NOT_FOUND", "VAULT_NOT_INITIALIZED", "LLM_NOT_CONFIGURED"}


@pytest.fixture(scope="module")
def protocol_daemon():
    daemon = ForegroundDaemon().start()
    project = daemon.project()
    yield daemon, project / ".hebbs"
    daemon.stop()
    shutil.rmtree(project, ignore_errors=True)


def test_the_five_shapes_get_invalid_request_and_the_connection_lives_on(protocol_daemon):
    daemon, vault = protocol_daemon
    log_before = daemon.log_bytes()
    with raw_connect(daemon.socket) as sock:
        for name, body in five_shapes(str(vault)).items():
            sock.sendall(frame(body))
            reply = final_reply(sock)
            assert reply is not None, f"{name}: the daemon closed the connection"
            assert reply["status_code"] == "INVALID_REQUEST", f"{name}: {reply}"
            assert len(reply["error"]) < 600, f"{name}: the error quotes the payload: {reply['error'][:200]}"
            sock.sendall(frame({"id": "after", "command": {"type": "ping"}}))
            assert final_reply(sock)["status"] == "ok", f"{name}: the connection is unusable afterwards"
    log = daemon.log()
    assert "Traceback" not in log
    # The 1 MB path used to be written into the log on every request.
    assert daemon.log_bytes() - log_before < 20_000


def test_random_frames_never_get_internal(protocol_daemon):
    daemon, vault = protocol_daemon
    rng = random.Random(FUZZ_SEED)
    codes: dict[str, int] = {}
    sock = raw_connect(daemon.socket)
    try:
        for n in range(FUZZ_FRAMES):
            body = random_frame(rng, str(vault))
            sock.sendall(frame(body))
            reply = final_reply(sock)
            assert reply is not None, f"frame {n} closed the connection: {body[:200]!r}"
            code = reply["status_code"]
            codes[code] = codes.get(code, 0) + 1
            assert code in FAIR, f"frame {n} got {code}: {reply.get('error', '')[:300]}\n{body[:300]!r}"
    finally:
        sock.close()
    assert codes.get("INVALID_REQUEST", 0) > FUZZ_FRAMES // 3, codes  # the fuzz really is malformed
    assert "Traceback" not in daemon.log()
    assert daemon.alive()


@pytest.mark.parametrize("body, expected", [
    (b'{"id": 1, "command": {"type": "ping"}, "vault_path": "/a\\u0000b"}', "vault_path"),
    (b'{"id": 1, "command": {"type": "get", "id": "' + b"x" * 100 + b'"}}', "id"),
    (b'{"id": 1, "command": {"type": "recall", "time_range": [0, 99999999999999999999]}}', "64 bits"),
    (b'{"id": 1, "command": {"type": "remember", "content": "x", "created_at": 253402300800000000}}', "created_at"),
    (b'{"id": [1, 2], "command": {"type": "ping"}}', "id must be"),
    (b'{"id": 1, "command": {"type": "ping"}, "x": ' + b"[" * 65 + b"]" * 65 + b"}", "nests deeper"),
    (b'{"id": 1, "command": {"type": "ping"}, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests deeper"),
    (b'{"id": 1, "command": {"type": "' + b"p" * 10_000 + b'"}}', "unknown command"),
    (b'{"id": "caf\xc3\x28"}', "UTF-8"),
])
def test_decode_request_names_the_problem(body, expected):
    with pytest.raises(BadRequest) as caught:
        decode_request(body)
    assert expected in str(caught.value)
    assert len(str(caught.value)) < 600


def test_a_request_within_the_limits_still_decodes():
    body = (b'{"id": "r1", "command": {"type": "remember", "content": "x", "created_at": 253402300799999999, '
            b'"context": {"a": ' + b"[" * 40 + b"]" * 40 + b'}}, "vault_path": "/tmp/v/.hebbs"}')
    request = decode_request(body)
    assert request.id == "r1" and request.command.created_at == 253402300799999999


def test_many_threads_decoding_a_type_first_build_its_decoder_once(monkeypatch):
    """A new daemon died of SIGSEGV when two clients' first requests reached it together: msgspec
    built Request's type information in two threads at once. Each type's decoder is now built once,
    under a lock; the build is slowed here so that eight threads surely ask for it while it runs."""
    import threading
    import time

    import msgspec

    from hebbs import protocol, schema

    class Fresh(msgspec.Struct):
        text: str
        count: int = 0

    built: list[threading.Thread] = []
    real = msgspec.json.Decoder

    def slow_decoder(*args, **kwargs):
        built.append(threading.current_thread())
        time.sleep(0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(msgspec.json, "Decoder", slow_decoder)
    start = threading.Barrier(8)
    decoded: list[object] = []

    def first_decode() -> None:
        start.wait()
        decoded.append(protocol.convert({"text": "a", "count": 2}, Fresh))

    threads = [threading.Thread(target=first_decode) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and decoded == [Fresh("a", 2)] * 8
    assert schema.decoder("json", Fresh).decode(b'{"text": "b"}') == Fresh("b")
