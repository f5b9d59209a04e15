// sbx.git against the live daemon, local operations only: with_daemon.py's daemon keeps the
// default egress policy, which does not let a sandbox reach a git server on the host's loopback
// (tests/integration/test_git.py covers remotes, credentials and the egress proxy). The remote
// here is a bare repository inside the sandbox, cloned by local path; push/pull need no credentials.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox } from "../testlib/live.mjs";

const ORIGIN = "/tmp/origin.git";
const SEED = "/tmp/seed";
const REPO = "/work/repo";
const SEED_GIT = "git -c user.name=Seed -c user.email=seed@example.com";

let sbx;
async function sh(command) {
  const r = await sbx.commands.run(command, { timeoutS: 60 });
  assert.equal(r.exitCode, 0, JSON.stringify(r));
  return r.stdout;
}
const byPath = (st) => Object.fromEntries(st.files.map((f) => [f.path, f]));

before(async () => {
  sbx = await sandbox();
  await sh(
    `git init -q --bare -b main ${ORIGIN} && git init -q -b main ${SEED} && cd ${SEED} && ` +
      `echo '# demo' > README.md && git add README.md && ${SEED_GIT} commit -q -m first && git push -q ${ORIGIN} main`,
  );
});

test("clone, status, add, checkout -b, commit, branches", async () => {
  const r = await sbx.git.clone(ORIGIN, REPO, { branch: "main" });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.op, "clone");
  assert.equal(await sbx.files.read(`${REPO}/README.md`), "# demo\n");

  let st = await sbx.git.status(REPO);
  assert.equal(st.exitCode, 0, st.stderr);
  assert.deepEqual([st.branch, st.upstream, st.ahead, st.behind, st.files], ["main", "origin/main", 0, 0, []]);
  assert.equal(st.commit.length, 40);

  await sbx.files.write(`${REPO}/new.txt`, "new\n");
  await sbx.files.write(`${REPO}/README.md`, "# demo\nmore\n");
  let files = byPath(await sbx.git.status(REPO));
  assert.equal(files["new.txt"].kind, "untracked");
  assert.equal(files["new.txt"].staged, false);
  assert.deepEqual([files["README.md"].index, files["README.md"].worktree], [".", "M"]);

  assert.equal((await sbx.git.add(REPO, { files: ["new.txt"] })).exitCode, 0);
  files = byPath(await sbx.git.status(REPO));
  assert.equal(files["new.txt"].index, "A");
  assert.equal(files["new.txt"].staged, true);
  assert.equal(files["README.md"].staged, false);
  assert.equal((await sbx.git.add(REPO)).exitCode, 0); // everything
  files = byPath(await sbx.git.status(REPO));
  assert.deepEqual(Object.fromEntries(Object.entries(files).map(([p, f]) => [p, f.index])), { "README.md": "M", "new.txt": "A" });

  assert.equal((await sbx.git.checkout(REPO, "feature", { create: true })).exitCode, 0);
  const c = await sbx.git.commit(REPO, "add things", { author: { name: "Ada", email: "ada@example.com" } });
  assert.equal(c.exitCode, 0, c.stderr);
  st = await sbx.git.status(REPO);
  assert.deepEqual([st.branch, st.upstream, st.files], ["feature", null, []]);
  assert.equal(await sh(`git -C ${REPO} log -1 --format='%an <%ae>|%cn|%s'`), "Ada <ada@example.com>|Ada|add things\n");

  const b = await sbx.git.branches(REPO);
  assert.equal(b.exitCode, 0, b.stderr);
  assert.equal(b.current, "feature");
  assert.deepEqual(b.branches.map((x) => x.name).sort(), ["feature", "main"]);
  const main = b.branches.find((x) => x.name === "main");
  assert.equal(main.upstream, "origin/main");
  assert.equal(main.current, false);
  assert.deepEqual(b.remoteBranches, ["origin/main"]);

  // Git's failures are values.
  const empty = await sbx.git.commit(REPO, "empty", { author: "Ada <ada@example.com>" });
  assert.equal(empty.exitCode, 1);
  assert.match(empty.stdout, /nothing to commit/);
});

test("push to and pull from the local origin", async () => {
  const p = await sbx.git.push(REPO, { branch: "feature" });
  assert.equal(p.exitCode, 0, p.stderr);
  assert.equal(await sh(`git --git-dir ${ORIGIN} log -1 --format=%s feature`), "add things\n");
  assert.equal((await sbx.git.status(REPO)).upstream, "origin/feature");

  await sh(`cd ${SEED} && echo later > later.txt && git add later.txt && ${SEED_GIT} commit -q -m later && git push -q ${ORIGIN} main`);
  assert.equal((await sbx.git.checkout(REPO, "main")).exitCode, 0);
  const r = await sbx.git.pull(REPO, { rebase: false, timeoutS: 60 });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.op, "pull");
  assert.equal(await sbx.files.read(`${REPO}/later.txt`), "later\n");
  const st = await sbx.git.status(REPO);
  assert.deepEqual([st.branch, st.ahead, st.behind], ["main", 0, 0]);
});

test("invalid arguments throw invalid_argument (400)", async () => {
  await assert.rejects(sbx.git.clone("http://u:secret@example.com/r.git", "/tmp/x"), (e) => {
    assert.ok(e instanceof SandfortError);
    assert.equal(e.status, 400);
    assert.equal(e.code, "invalid_argument");
    assert.match(e.message, /must not carry a password/);
    return true;
  });
  await assert.rejects(sbx.git.status("/nonexistent/repo"), (e) => e.status === 400 && /does not exist/.test(e.message));
});
