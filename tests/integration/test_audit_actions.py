"""Actions outside the database (commands, forwarded calls) are recorded once the sandbox is
found started, under its id — a call to a sandbox that does not exist records nothing."""

MISSING = "sbx-0000000000000000"


def test_actions_are_recorded_under_the_sandbox_id_and_missing_sandboxes_record_nothing(org):
    member, admin = org["member"], org["admin"]
    sbx = member.create_sandbox(name="audited-by-name")
    try:
        assert member.exec("audited-by-name", command="echo by-name")["stdout"] == "by-name\n"
        assert member.post("/v1/sandboxes/audited-by-name/files/mkdir", {"path": "/tmp/audited"}).status == 201
        assert member.post(f"/v1/sandboxes/{MISSING}/process/exec", {"command": "true"}).status == 404
        assert member.post(f"/v1/sandboxes/{MISSING}/files/mkdir", {"path": "/x"}).status == 404

        items = admin.get("/v1/audit?limit=1000").json()["items"]
        execs = [e for e in items if e["action"] == "sandbox.exec" and e["details"].get("command") == "echo by-name"]
        assert len(execs) == 1 and execs[0]["target"] == sbx["id"] and execs[0]["outcome"] == "accepted", execs
        mkdirs = [e for e in items if e["action"] == "sandbox.files.mkdir"]
        assert mkdirs and all(e["target"] == sbx["id"] for e in mkdirs), mkdirs
        assert not [e for e in items if e["target"] in (MISSING, "audited-by-name")]
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")
