"""pause() freezes a sandbox (calls that need it running raise ConflictError), resume() thaws it."""

import pytest

from sandfort_sdk import ConflictError


def test_pause_and_resume(client):
    with client.create_sandbox() as sbx:
        sbx.process_exec(command="echo kept > /tmp/state")
        assert sbx.pause() is sbx and sbx.state == "paused"
        assert sbx.pause().state == "paused"
        assert client.get_sandbox(sbx.id).state == "paused"
        assert sbx.wait_until("paused", timeout_s=5).state == "paused"
        with pytest.raises(ConflictError) as ei:
            sbx.process_exec(command="true")
        assert ei.value.code == "conflict" and "paused" in str(ei.value)
        sbx.resume()
        assert sbx.state == "started"
        assert sbx.resume().state == "started"
        assert sbx.process_exec(command="cat /tmp/state").stdout == "kept\n"
        sbx.stop()
        with pytest.raises(ConflictError):
            sbx.pause()
        with pytest.raises(ConflictError):
            sbx.resume()
