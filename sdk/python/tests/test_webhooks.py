"""sandfort_sdk.webhooks.verify against good, tampered, wrongly keyed and stale deliveries, and
client.webhooks against a live daemon: the secret shown once, the address policy, the log."""

import json
import time
import uuid

import pytest

from sandfort_sdk import Client, InvalidArgumentError, NotFoundError, PermissionDeniedError, webhooks
from sandfort_sdk.webhooks import WebhookSignatureError, sign, verify

SECRET = "whsec_" + "ab" * 32
BODY = json.dumps({"seq": 7, "type": "sandbox.stopped", "reason": "oom"}).encode()


def test_a_good_signature_verifies_and_yields_the_event():
    t = int(time.time())
    assert verify(BODY, sign(BODY, SECRET, t), SECRET)["reason"] == "oom"
    # The scheme, computed apart: HMAC-SHA256 keyed by the secret's text over "<t>.<body>".
    assert sign(b'{"a":1}', SECRET, 1700000000) == \
        "t=1700000000,v1=4b04ef65acbc4206285c1c32a0ecc6736f604a6d113dadee0537e39c2d2b1c41"
    # A header with more than one v1 (a rotation overlap) passes when one matches.
    header = sign(BODY, SECRET, t) + ",v1=" + "0" * 64
    assert verify(BODY, header, SECRET)["seq"] == 7


def test_a_tampered_body_a_wrong_secret_a_stale_or_malformed_header_are_refused():
    t = int(time.time())
    header = sign(BODY, SECRET, t)
    with pytest.raises(WebhookSignatureError, match="no signature matches"):
        verify(BODY.replace(b"oom", b"ttl"), header, SECRET)
    with pytest.raises(WebhookSignatureError, match="no signature matches"):
        verify(BODY, header, "whsec_" + "cd" * 32)
    stale = sign(BODY, SECRET, t - 301)
    with pytest.raises(WebhookSignatureError, match="tolerance"):
        verify(BODY, stale, SECRET)
    assert verify(BODY, stale, SECRET, tolerance_s=600)["seq"] == 7
    with pytest.raises(WebhookSignatureError, match="tolerance"):
        verify(BODY, sign(BODY, SECRET, t + 3600), SECRET)  # from the future too
    for bad in ("", "v1=abc", "t=now,v1=abc", f"t={t}"):
        with pytest.raises(WebhookSignatureError):
            verify(BODY, bad, SECRET)


@pytest.fixture(scope="module")
def admin(client, env):
    org = client.create_org(f"webhooks-py-{uuid.uuid4().hex[:8]}")
    key = client.create_api_key("webhooks-admin", role="admin", org=org.id)
    return Client(base_url=env["url"], api_key=key.key)


def test_create_list_update_rotate_log_delete(admin, client, env):
    # A public IP literal needs no lookup; no snapshot is deleted in this organization, so nothing is sent.
    hook = admin.webhooks.create("https://1.1.1.1/sandfort", types=["snapshot.deleted"], description="py")
    assert hook.id.startswith("whk-") and hook.secret and hook.secret.startswith("whsec_")
    assert hook.types == ["snapshot.deleted"] and hook.enabled
    listed = admin.webhooks.list()
    assert [w.id for w in listed] == [hook.id] and listed[0].secret is None
    assert admin.webhooks.get(hook.id).secret is None
    off = admin.webhooks.update(hook.id, enabled=False, types=[])
    assert off.enabled is False and off.types == []
    rotated = admin.webhooks.rotate_secret(hook.id, keep_previous_s=60)
    assert rotated.secret and rotated.secret != hook.secret
    page = admin.webhooks.deliveries(hook.id, limit=10)
    assert page.items == [] and page.next_cursor is None
    admin.webhooks.delete(hook.id)
    with pytest.raises(NotFoundError):
        admin.webhooks.get(hook.id)


def test_loopback_and_metadata_urls_are_refused_and_members_cannot_manage(admin, client, env):
    for url in ("http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data/", "http://localhost/"):
        with pytest.raises(InvalidArgumentError, match="refused"):
            admin.webhooks.create(url)
    member_key = admin.create_api_key("webhooks-member", role="member")
    member = Client(base_url=env["url"], api_key=member_key.key)
    with pytest.raises(PermissionDeniedError):
        member.webhooks.list()
    assert webhooks.DEFAULT_TOLERANCE_S == 300
