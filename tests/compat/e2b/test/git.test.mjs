// The SDK's git helpers (sbx.git) are commands the SDK builds and runs through process.Process:
// they work wherever git is, and the default image has it. A bare repository inside the sandbox
// stands in for a remote (egress stays closed by default).
import { test } from "node:test";
import assert from "node:assert/strict";
import { CommandExitError } from "e2b";
import { sandbox } from "../lib/live.mjs";

test("git: init, configureUser, add, commit, status, branches", async () => {
  const sbx = await sandbox();
  const repo = "/tmp/repo";
  await sbx.git.init(repo, { initialBranch: "main" });
  await sbx.git.configureUser("Ada Agent", "ada@example.com");
  assert.equal(await sbx.git.getConfig("user.email"), "ada@example.com");

  await sbx.files.write(`${repo}/README.md`, "hello\n");
  let status = await sbx.git.status(repo);
  assert.equal(status.currentBranch, "main");
  assert.equal(status.hasUntracked, true);
  assert.deepEqual(status.fileStatus.map((f) => [f.name, f.status]), [["README.md", "untracked"]]);

  await sbx.git.add(repo);
  await sbx.git.commit(repo, "first commit");
  status = await sbx.git.status(repo);
  assert.equal(status.isClean, true, JSON.stringify(status));
  const log = await sbx.commands.run(`git -C ${repo} log --format='%an <%ae> %s'`);
  assert.equal(log.stdout, "Ada Agent <ada@example.com> first commit\n");

  await sbx.git.createBranch(repo, "feature");
  await sbx.files.write(`${repo}/README.md`, "hello again\n");
  status = await sbx.git.status(repo);
  assert.equal(status.currentBranch, "feature");
  assert.equal(status.hasChanges, true);
  await sbx.git.add(repo, { files: ["README.md"] });
  await sbx.git.commit(repo, "second", { authorName: "Bob", authorEmail: "bob@example.com" });
  const branches = await sbx.git.branches(repo);
  assert.deepEqual(branches.branches.sort(), ["feature", "main"]);
  assert.equal(branches.currentBranch, "feature");
  await sbx.git.checkoutBranch(repo, "main");
  assert.equal(await sbx.files.read(`${repo}/README.md`), "hello\n");
  await sbx.git.reset(repo, { mode: "hard", target: "feature" });
  assert.equal(await sbx.files.read(`${repo}/README.md`), "hello again\n");
});

test("git: remoteAdd, push, clone, pull against a bare repository", async () => {
  const sbx = await sandbox();
  await sbx.commands.run("git init --bare --initial-branch=main /tmp/origin.git");
  await sbx.git.configureUser("Ada Agent", "ada@example.com");
  await sbx.git.init("/tmp/work", { initialBranch: "main" });
  await sbx.files.write("/tmp/work/a.txt", "one\n");
  await sbx.git.add("/tmp/work");
  await sbx.git.commit("/tmp/work", "one");
  await sbx.git.remoteAdd("/tmp/work", "origin", "/tmp/origin.git");
  assert.equal(await sbx.git.remoteGet("/tmp/work", "origin"), "/tmp/origin.git");
  await sbx.git.push("/tmp/work", { remote: "origin", branch: "main", setUpstream: true });

  await sbx.git.clone("/tmp/origin.git", { path: "/tmp/copy" });
  assert.equal(await sbx.files.read("/tmp/copy/a.txt"), "one\n");

  await sbx.files.write("/tmp/work/a.txt", "two\n");
  await sbx.git.add("/tmp/work");
  await sbx.git.commit("/tmp/work", "two");
  await sbx.git.push("/tmp/work");
  await sbx.git.pull("/tmp/copy");
  assert.equal(await sbx.files.read("/tmp/copy/a.txt"), "two\n");
});

test("git: a failing git command is CommandExitError with git's message", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/not-a-repo");
  const err = await sbx.git.status("/tmp/not-a-repo").catch((e) => e);
  assert.ok(err instanceof CommandExitError, String(err));
  assert.match(err.stderr, /not a git repository/);
});
