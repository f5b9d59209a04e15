// examples/e2b: E2B's own examples, unchanged, run against this daemon with nothing but the
// environment with_e2b_daemon.py exports. Each runs from a copy placed beside this suite's
// node_modules (the pinned SDKs), since an example resolves `e2b` from where its file lies.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const examples = join(here, "..", "..", "..", "..", "examples", "e2b");
const scratch = mkdtempSync(join(here, "..", ".examples-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

// What each example must print, beyond exiting 0.
const expected = {
  "quickstart.mjs": ["Hello from E2B!", "hello from a file", "files: hello.py", "CommandExitError: exit code 3"],
  // Its template, code-interpreter-v1, is sandfort/code-interpreter:bookworm (code_interpreter.test.mjs).
  "code_interpreter.mjs": ["2", "figure: [ 'png' ]", "error: NameError name 'undefined_name' is not defined", "hello from js"],
};

const files = readdirSync(examples).filter((f) => f.endsWith(".mjs"));

test("examples/e2b holds the examples this test knows", () => {
  assert.ok(files.includes("quickstart.mjs"), files.join(" "));
});

// The code interpreter's example needs its template's image: missing, it fails under CI and is
// skipped elsewhere, as in code_interpreter.test.mjs.
function needs(file) {
  if (file !== "code_interpreter.mjs" || process.env.CI === "true") return false;
  try {
    execFileSync("docker", ["image", "inspect", "sandfort/code-interpreter:bookworm"], { stdio: "ignore" });
    return false;
  } catch {
    return "sandfort/code-interpreter:bookworm is missing: run scripts/build-code-interpreter-image";
  }
}

for (const file of files) {
  test(`examples/e2b/${file} runs unchanged`, { skip: needs(file) }, async () => {
    copyFileSync(join(examples, file), join(scratch, file));
    const { stdout } = await promisify(execFile)("node", [join(scratch, file)], { timeout: 300_000 });
    for (const line of expected[file] ?? []) assert.ok(stdout.includes(line), `${line} not in:\n${stdout}`);
  });
}
