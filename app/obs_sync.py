"""Set OBS's audio sync offset from Kagura, through obs-websocket v5 (obsws-python).

The idol on screen trails the voice by Kagura's audio-to-photon latency; a streamer hides that
by delaying the microphone in OBS by the same amount (Advanced Audio Properties ▸ Sync Offset,
or remotely: the obs-websocket request ``SetInputAudioSyncOffset``).

    obs = ObsSync()                                  # localhost:4455, no password
    obs.list_audio_inputs()                          # ["Mic/Aux", "Desktop Audio", ...]
    obs.set_audio_sync_offset("Mic/Aux", 120)        # delay the mic 120 ms

Each call opens a connection, does its work and closes it (the calls are rare: a button
press), so OBS may be restarted in between. Every failure is an `ObsError` with one line in
plain words: OBS not running / WebSocket server off, wrong or missing password, no such input.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_OFFSET_MS", "MIN_OFFSET_MS", "ObsError", "ObsNoSuchInput", "ObsSync"]

# OBS accepts sync offsets in this range (obs-websocket's SetInputAudioSyncOffset).
MIN_OFFSET_MS = -950
MAX_OFFSET_MS = 20000

# obsws-python logs every failure with a traceback (logger.exception); the one-line ObsError
# says it all, so keep the library quiet unless the application configures logging itself.
logging.getLogger("obsws_python").addHandler(logging.NullHandler())


class _HidePassword(logging.Filter):
    """obsws-python logs its connect parameters, the password in plain text among them, at
    INFO (`kagura live -v` shows INFO): every password ObsSync connected with, and whatever
    stands in a `password='...'` field, is blanked out of the library's records."""

    _PATTERN = re.compile(r"password='.*?'(?=,? \w+=|\)|$)")

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = hidden = record.getMessage()
        for secret in self.secrets:  # first: the pattern could cut a tricky one in two
            hidden = hidden.replace(secret, "***")
        if "password=" in hidden:
            hidden = self._PATTERN.sub("password='***'", hidden)
        if hidden != text:
            record.msg, record.args = hidden, None
        return True


_HIDE = _HidePassword()
# a logger's filters see only the records logged on it, not its children's: these are the
# library's loggers (its classes' names under their modules), where the parameters are logged
for _name in ("obsws_python.baseclient.ObsClient", "obsws_python.reqs.ReqClient"):
    logging.getLogger(_name).addFilter(_HIDE)


class ObsError(ValueError):
    """OBS could not be reached or refused a request; the message is one line for the user."""


class ObsNoSuchInput(ObsError):
    """OBS has no input of that name (renamed or removed since the user chose it)."""


class ObsSync:
    """A small obs-websocket client for the one thing Kagura needs: audio sync offsets.

    `timeout`: seconds to wait for OBS to connect and to answer each request. `password`:
    the password, or a function returning it, called at each connection (the app's comes from
    the system keyring, which is read only when OBS is asked something).
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 4455,
        password: str | Callable[[], str | None] | None = None,
        timeout: float = 3.0,
    ) -> None:
        self.host = host
        self.port = int(port)
        self._password = password
        self.timeout = timeout

    @property
    def password(self) -> str:
        p = self._password
        return (p() if callable(p) else p) or ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"ObsSync({self.address!r})"

    # -- requests -------------------------------------------------------------------------------

    def list_audio_inputs(self) -> list[str]:
        """Names of the OBS inputs that carry audio, in OBS's order.

        OBS is asked for every input (GetInputList) and then, per input, for its sync offset
        (GetInputAudioSyncOffset): inputs without audio (images, video-only capture) answer that
        request with an error, so no list of input kinds has to be kept up to date here.
        """
        with self._connect() as client:
            data = self._send(client, "GetInputList", {}) or {}
            names = [str(i.get("inputName", "")) for i in data.get("inputs", [])]
            audio = []
            for name in names:
                try:
                    self._send(client, "GetInputAudioSyncOffset", {"inputName": name})
                except _RequestFailed:
                    continue
                audio.append(name)
            return audio

    def get_audio_sync_offset(self, input_name: str) -> int:
        """The input's current sync offset in milliseconds."""
        with self._connect() as client:
            data = self._send(client, "GetInputAudioSyncOffset", {"inputName": input_name})
            return int((data or {}).get("inputAudioSyncOffset", 0))

    def set_audio_sync_offset(self, input_name: str, offset_ms: float) -> int:
        """Delay `input_name`'s audio by `offset_ms` (rounded to whole ms); returns what was set.

        A positive offset delays the sound, which is what matching a late picture needs.
        """
        if not input_name:
            raise ObsError("no OBS audio input chosen; pick the microphone input to delay")
        ms = round(float(offset_ms))
        if not MIN_OFFSET_MS <= ms <= MAX_OFFSET_MS:
            raise ObsError(
                f"audio sync offset {ms} ms is outside what OBS accepts "
                f"({MIN_OFFSET_MS} to {MAX_OFFSET_MS} ms)"
            )
        with self._connect() as client:
            self._send(
                client,
                "SetInputAudioSyncOffset",
                {"inputName": input_name, "inputAudioSyncOffset": ms},
            )
        return ms

    # -- plumbing -------------------------------------------------------------------------------

    def _connect(self) -> Any:
        """A connected, identified obsws_python.ReqClient (a context manager), or ObsError."""
        try:
            import obsws_python as obs
            from obsws_python.error import OBSSDKError
            from websocket import WebSocketConnectionClosedException, WebSocketException
        except ImportError:
            raise ObsError(
                "talking to OBS needs the obsws-python package (pip install obsws-python)"
            ) from None
        password = self.password
        if password:
            _HIDE.secrets.add(password)
        try:
            return obs.ReqClient(
                host=self.host, port=self.port, password=password, timeout=self.timeout
            )
        except OBSSDKError as exc:
            text = str(exc)
            if "no password" in text:
                raise ObsError(
                    f"OBS at {self.address} asks for a password — copy it from "
                    "Tools ▸ WebSocket Server Settings ▸ Show Connect Info"
                ) from None
            raise ObsError(
                f"OBS at {self.address} refused the connection — check the password in "
                "Tools ▸ WebSocket Server Settings"
            ) from None
        except WebSocketConnectionClosedException:
            # OBS hangs up during Identify when the password is wrong (close code 4009)
            raise ObsError(
                f"OBS at {self.address} closed the connection while Kagura identified itself "
                "— check the password in Tools ▸ WebSocket Server Settings"
            ) from None
        except (OSError, WebSocketException, ValueError, KeyError) as exc:
            # refused, timed out, unknown host, not a WebSocket server, odd hello
            if isinstance(exc, socket.gaierror):
                raise ObsError(f"OBS host {self.host!r} is unknown — check the address") from None
            # both causes: OBS not running at all, or its WebSocket server off / elsewhere
            raise ObsError(
                f"OBS is not reachable at {self.address}: either OBS is not running, or its "
                "WebSocket server is off or on another port (in OBS: Tools ▸ WebSocket Server "
                "Settings)"
            ) from None

    def _send(self, client: Any, request: str, data: dict) -> dict | None:
        from obsws_python.error import OBSSDKError, OBSSDKRequestError
        from websocket import WebSocketException

        try:
            return client.send(request, data or None, raw=True)
        except OBSSDKRequestError as exc:
            _, _, comment = str(exc).partition("With message:")
            missing = exc.code == 600 and data.get("inputName") is not None  # ResourceNotFound
            kind = _MissingInput if missing else _RequestFailed
            raise kind(request, exc.code, comment.strip(), data) from None
        except (OBSSDKError, OSError, WebSocketException, ValueError, KeyError):
            raise ObsError(
                f"OBS at {self.address} stopped answering ({request}) — is it still running?"
            ) from None


class _RequestFailed(ObsError):
    """OBS answered a request with an error status (code 600: no such resource, ...)."""

    def __init__(self, request: str, code: int, comment: str, data: dict) -> None:
        self.request, self.code = request, code
        name = data.get("inputName")
        if code == 600 and name is not None:  # ResourceNotFound
            text = f"OBS has no input named {name!r}"
        else:
            why = comment.rstrip(".") if comment else f"error code {code}"
            text = f"OBS refused {request}" + (f" for {name!r}" if name else "") + f": {why}"
        super().__init__(text)


class _MissingInput(_RequestFailed, ObsNoSuchInput):
    """Code 600 for a named input: the caller may forget a remembered name."""
