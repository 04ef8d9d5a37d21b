"""A fake obs-websocket v5 server on 127.0.0.1 (stdlib sockets, no OBS needed), for the tests
that drive Kagura's real OBS client against it (tests/test_obs_sync.py, the live window's).

It speaks just enough of RFC 6455 and obs-websocket v5 for obsws-python: the HTTP upgrade,
Hello (op 0, optionally with an authentication challenge) → Identify (op 1) → Identified
(op 2), then Request (op 6) → RequestResponse (op 7) for GetInputList, GetInputAudioSyncOffset
and SetInputAudioSyncOffset. A wrong password is answered the way OBS does: a close frame with
code 4009.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import struct
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

INPUTS = [
    {"inputName": "Mic/Aux", "inputKind": "pulse_input_capture", "audio": True},
    {"inputName": "Kagura window", "inputKind": "xcomposite_input", "audio": False},
    {"inputName": "Desktop Audio", "inputKind": "pulse_output_capture", "audio": True},
]


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("client went away")
        buf += chunk
    return buf


def _recv_frame(conn: socket.socket) -> tuple[int, bytes]:
    b0, b1 = _recv_exact(conn, 2)
    opcode, n = b0 & 0x0F, b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack(">H", _recv_exact(conn, 2))
    elif n == 127:
        (n,) = struct.unpack(">Q", _recv_exact(conn, 8))
    mask = _recv_exact(conn, 4) if b1 & 0x80 else b"\0\0\0\0"
    data = bytes(c ^ mask[i % 4] for i, c in enumerate(_recv_exact(conn, n)))
    return opcode, data


def _send_frame(conn: socket.socket, payload: bytes, opcode: int = 0x1) -> None:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    conn.sendall(head + payload)


def _auth_string(password: str, salt: str, challenge: str) -> str:
    secret = base64.b64encode(hashlib.sha256((password + salt).encode()).digest())
    return base64.b64encode(hashlib.sha256(secret + challenge.encode()).digest()).decode()


class FakeObs:
    """obs-websocket v5 on 127.0.0.1:<free port>; records every request it answers."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        self.requests: list[tuple[str, dict]] = []
        self.offsets = {i["inputName"]: 0 for i in INPUTS if i["audio"]}
        self.identified = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionError, OSError):
            self._session(conn)

    def _session(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        headers = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        accept = base64.b64encode(
            hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
        ).decode()
        conn.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        hello: dict = {"obsWebSocketVersion": "5.5.0", "rpcVersion": 1}
        salt, challenge = "c2FsdA==", "Y2hhbGxlbmdl"
        if self.password is not None:
            hello["authentication"] = {"salt": salt, "challenge": challenge}
        self._send(conn, 0, hello)
        opcode, data = _recv_frame(conn)
        msg = json.loads(data)
        assert msg["op"] == 1 and msg["d"]["rpcVersion"] == 1
        if self.password is not None:
            want = _auth_string(self.password, salt, challenge)
            if msg["d"].get("authentication") != want:
                _send_frame(conn, struct.pack(">H", 4009) + b"Authentication failed.", 0x8)
                return
        self._send(conn, 2, {"negotiatedRpcVersion": 1})
        self.identified += 1
        while True:
            opcode, data = _recv_frame(conn)
            if opcode == 0x8:  # close
                _send_frame(conn, data[:2], 0x8)
                return
            msg = json.loads(data)
            assert msg["op"] == 6
            self._answer(conn, msg["d"])

    def _send(self, conn: socket.socket, op: int, d: dict) -> None:
        _send_frame(conn, json.dumps({"op": op, "d": d}).encode())

    def _answer(self, conn: socket.socket, d: dict) -> None:
        rtype, rid, data = d["requestType"], d["requestId"], d.get("requestData") or {}
        self.requests.append((rtype, data))
        status: dict = {"result": True, "code": 100}
        out: dict | None = None
        name = data.get("inputName")
        if rtype == "GetInputList":
            out = {"inputs": [{k: i[k] for k in ("inputName", "inputKind")} for i in INPUTS]}
        elif rtype in ("GetInputAudioSyncOffset", "SetInputAudioSyncOffset"):
            known = {i["inputName"]: i for i in INPUTS}
            if name not in known:
                status = {"result": False, "code": 600, "comment": "No source was found."}
            elif not known[name]["audio"]:
                status = {
                    "result": False,
                    "code": 604,
                    "comment": "The specified input does not support audio.",
                }
            elif rtype == "GetInputAudioSyncOffset":
                out = {"inputAudioSyncOffset": self.offsets[name]}
            else:
                self.offsets[name] = data["inputAudioSyncOffset"]
        else:
            status = {"result": False, "code": 204, "comment": "Unknown request type."}
        resp = {"requestType": rtype, "requestId": rid, "requestStatus": status}
        if out is not None:
            resp["responseData"] = out
        self._send(conn, 7, resp)
