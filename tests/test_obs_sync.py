"""ObsSync against the fake obs-websocket v5 server of tests/obs_server.py (no OBS needed)."""

from __future__ import annotations

import socket

import pytest

from app.obs_sync import ObsError, ObsSync
from tests.obs_server import FakeObs


@pytest.fixture
def fake_obs():
    server = FakeObs()
    yield server
    server.close()


def test_lists_only_inputs_with_audio(fake_obs):
    obs = ObsSync("127.0.0.1", fake_obs.port)
    assert obs.list_audio_inputs() == ["Mic/Aux", "Desktop Audio"]
    assert fake_obs.requests[0] == ("GetInputList", {})
    assert fake_obs.identified == 1


def test_sets_the_offset_on_the_named_input(fake_obs):
    obs = ObsSync("127.0.0.1", fake_obs.port)
    assert obs.set_audio_sync_offset("Mic/Aux", 123.4) == 123
    assert fake_obs.requests[-1] == (
        "SetInputAudioSyncOffset",
        {"inputName": "Mic/Aux", "inputAudioSyncOffset": 123},
    )
    assert isinstance(fake_obs.requests[-1][1]["inputAudioSyncOffset"], int)
    assert obs.get_audio_sync_offset("Mic/Aux") == 123
    assert fake_obs.offsets == {"Mic/Aux": 123, "Desktop Audio": 0}


def test_request_errors_are_one_line(fake_obs):
    obs = ObsSync("127.0.0.1", fake_obs.port)
    with pytest.raises(ObsError, match="OBS has no input named 'Webcam mic'"):
        obs.set_audio_sync_offset("Webcam mic", 100)
    with pytest.raises(ObsError, match="does not support audio") as info:
        obs.set_audio_sync_offset("Kagura window", 100)
    assert "\n" not in str(info.value)
    with pytest.raises(ObsError, match="outside what OBS accepts"):
        obs.set_audio_sync_offset("Mic/Aux", 25000)
    assert all(
        r[0] != "SetInputAudioSyncOffset" or r[1]["inputAudioSyncOffset"] == 100
        for r in fake_obs.requests
    )


def test_password():
    server = FakeObs(password="s3cret")
    try:
        assert ObsSync("127.0.0.1", server.port, "s3cret").set_audio_sync_offset("Mic/Aux", 80)
        assert server.offsets["Mic/Aux"] == 80
        with pytest.raises(ObsError, match="asks for a password"):
            ObsSync("127.0.0.1", server.port).list_audio_inputs()
        with pytest.raises(ObsError, match="check the password"):
            ObsSync("127.0.0.1", server.port, "wrong").list_audio_inputs()
    finally:
        server.close()


def test_unreachable_port_is_a_plain_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    obs = ObsSync("127.0.0.1", port, timeout=1)
    with pytest.raises(ObsError) as info:
        obs.set_audio_sync_offset("Mic/Aux", 100)
    msg = str(info.value)
    assert msg == (
        f"OBS is not reachable at 127.0.0.1:{port}: either OBS is not running, or its "
        "WebSocket server is off or on another port (in OBS: Tools ▸ WebSocket Server Settings)"
    )
    assert isinstance(info.value, ValueError)
    with pytest.raises(ObsError, match="not reachable"):
        obs.list_audio_inputs()


def test_the_password_never_reaches_the_log(capsys):
    """obsws-python logs its connect parameters, password included, at INFO: `kagura live -v`
    (here -vv, DEBUG) must show the connection without it."""
    from app.log_setup import configure, reset

    tricky = "a', b=c hunter2-Zq"  # ends a password='...' field early for a pattern
    server = FakeObs(password=tricky)
    try:
        configure(2)
        ObsSync("127.0.0.1", server.port, tricky).list_audio_inputs()
        with pytest.raises(ObsError):
            ObsSync("127.0.0.1", server.port, "wrong-Zq").list_audio_inputs()
    finally:
        reset()
        server.close()
    err = capsys.readouterr().err
    assert f"port={server.port} password='***'" in err  # the record is there, blanked
    assert "hunter2" not in err and "wrong-Zq" not in err
