"""A private PulseAudio server for tests that need real audio through PortAudio.

    def test_x(pulse):                       # the fixture: tests/conftest.py
        pulse.play(wav)                      # paplay into the null sink "kagura_test"
        Capture("pulse")                     # records the sink's monitor (the default source)
        pulse.unload_sink(); pulse.load_sink()

The server runs as the current user (root included: it warns, and works) with its runtime
directory, cookie, state and client config in a temporary directory; it speaks only on its own
socket, never autospawns, and is stopped at the end of the session. PULSE_SERVER (and friends)
are set in os.environ, so libpulse — and ALSA's "pulse" PCM from libasound2-plugins, which
PortAudio lists as the device "pulse" — reach it.

Needs the Debian packages pulseaudio and pulseaudio-utils (pactl, paplay, parec);
pulseaudio pulls in libasound2-plugins.

A fresh module-null-sink renders its first 2 s block before anything reaches its monitor, so a
newly loaded sink delivers data about 2 s after `load_sink`; `wait_for_data` measures when.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SINK = "kagura_test"
RATE = 48000
_ENV_KEYS = (
    "PULSE_SERVER",
    "PULSE_COOKIE",
    "PULSE_CLIENTCONFIG",
    "PULSE_RUNTIME_PATH",
    "PULSE_STATE_PATH",
)


class PulseServer:
    def __init__(self, sink: str = SINK, rate: int = RATE) -> None:
        self.sink = sink
        self.rate = rate
        self.monitor = f"{sink}.monitor"
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._saved_env: dict[str, str | None] = {}

    # -- life cycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> PulseServer:
        missing = [t for t in ("pulseaudio", "pactl", "paplay", "parec") if not shutil.which(t)]
        if missing:
            raise RuntimeError(
                f"{', '.join(missing)} not found: install pulseaudio pulseaudio-utils "
                "(bash scripts/setup.sh)"
            )
        self.dir = Path(tempfile.mkdtemp(prefix="kagura-pulse-"))
        runtime = self.dir / "runtime"
        runtime.mkdir(mode=0o700)
        socket = self.dir / "native"
        client_conf = self.dir / "client.conf"
        client_conf.write_text("autospawn = no\n")
        client_env = {
            "PULSE_SERVER": f"unix:{socket}",
            "PULSE_COOKIE": str(self.dir / "cookie"),
            "PULSE_CLIENTCONFIG": str(client_conf),
            "PULSE_RUNTIME_PATH": str(runtime),
            "PULSE_STATE_PATH": str(self.dir / "state"),
        }
        daemon_env = {**os.environ, **client_env, "HOME": str(self.dir)}
        daemon_env["XDG_RUNTIME_DIR"] = str(self.dir)
        daemon_env["XDG_CONFIG_HOME"] = str(self.dir / "config")
        daemon_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.log = self.dir / "pulseaudio.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    "pulseaudio",
                    "--daemonize=no",
                    "--system=false",
                    "-n",  # no default.pa: only the modules below
                    "--exit-idle-time=-1",
                    "--disallow-exit",
                    "--use-pid-file=no",
                    "--log-target=stderr",
                    "--log-level=warning",
                    f"--load=module-native-protocol-unix socket={socket} auth-anonymous=1",
                    f"--load=module-null-sink sink_name={self.sink} rate={self.rate}",
                ],
                env=daemon_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        for key, value in client_env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited: {self.log.read_text()[-2000:]}")
            if socket.exists() and self.pactl("info", check=False).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"pulseaudio did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        self.pactl("set-default-source", self.monitor)
        if "sounddevice" in sys.modules:  # PortAudio listed devices before the server ran
            from audio.capture import refresh_devices

            refresh_devices()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PulseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control --------------------------------------------------------------------------------

    def pactl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pactl", *args], capture_output=True, text=True, check=check, timeout=10
        )

    def sink_module(self) -> str | None:
        """Index of the module that provides the null sink, None when it is unloaded."""
        for line in self.pactl("list", "short", "modules").stdout.splitlines():
            fields = line.split("\t")
            if len(fields) > 2 and "module-null-sink" in fields[1] and self.sink in fields[2]:
                return fields[0]
        return None

    def unload_sink(self) -> None:
        """Remove the sink (and its monitor source) as if the device were unplugged."""
        module = self.sink_module()
        if module is not None:
            self.pactl("unload-module", module)

    def load_sink(self) -> float:
        """Bring the sink back; returns time.monotonic() just after the module loaded."""
        self.pactl("load-module", "module-null-sink", f"sink_name={self.sink}", f"rate={self.rate}")
        loaded = time.monotonic()
        self.pactl("set-default-source", self.monitor)
        return loaded

    def wait_for_data(self, timeout: float = 5.0) -> float:
        """time.monotonic() when the monitor source first delivers data to a new recorder."""
        proc = subprocess.Popen(
            ["parec", "--latency-msec=5", f"--device={self.monitor}", "--raw"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            if not ready:
                raise TimeoutError(f"{self.monitor} delivered nothing within {timeout} s")
            return time.monotonic()
        finally:
            proc.kill()
            proc.wait()

    def play(self, path: str | os.PathLike[str]) -> subprocess.Popen[bytes]:
        """Start playing a sound file into the sink (returns the paplay process)."""
        return subprocess.Popen(
            ["paplay", f"--device={self.sink}", "--latency-msec=20", os.fspath(path)],
            stderr=subprocess.PIPE,
        )
