#!/usr/bin/env node
// An agent loop with the TypeScript SDK: write code into a sandbox, run it, read the exit code and
// stderr, "fix" it, run again, until it passes. The "model" is a scripted list of attempts (the
// first ones buggy); a real agent would ask its model for the next attempt, given the feedback.
//
//   cd examples/typescript && npm install          # links @sandfort/sdk from ../../sdk/typescript
//   SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_... node agent_loop.mjs
//
// Without `npm install` it falls back to the repository's built SDK (sdk/typescript/dist).
// Exit status 0 when an attempt passed, 1 when every attempt failed.

let sdk;
let from = "@sandfort/sdk";
try {
  sdk = await import("@sandfort/sdk");
} catch (e) {
  if (e?.code !== "ERR_MODULE_NOT_FOUND") throw e;
  from = new URL("../../sdk/typescript/dist/esm/index.js", import.meta.url).href;
  sdk = await import(from);
}
const { Sandbox, SandfortError } = sdk;

const TASK = "Write stats.js: print the mean and the median of [3, 1, 4, 1, 5, 9, 2, 6] as 'mean=3.875 median=3.5'.";

// The test the agent's code must pass, run inside the sandbox after each attempt.
const TEST = `
const { execFileSync } = require("node:child_process");
let out;
try {
  out = execFileSync("node", ["stats.js"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
} catch (e) {
  console.error("stats.js exited " + e.status);
  process.exit(1);
}
if (out.trim() !== "mean=3.875 median=3.5") {
  console.error("unexpected output: " + JSON.stringify(out));
  process.exit(1);
}
console.log("tests passed");
`;

// Stands in for an LLM: the next attempt, given the last feedback.
const ATTEMPTS = [
  // 1: a ReferenceError (a typo).
  `const data = [3, 1, 4, 1, 5, 9, 2, 6];
const mean = data.reduce((a, b) => a + b, 0) / dta.length;
console.log(\`mean=\${mean} median=?\`);
`,
  // 2: runs, but sorts as strings and takes the wrong middle for an even length.
  `const data = [3, 1, 4, 1, 5, 9, 2, 6];
const mean = data.reduce((a, b) => a + b, 0) / data.length;
const s = [...data].sort();
console.log(\`mean=\${mean} median=\${s[s.length >> 1]}\`);
`,
  // 3: correct.
  `const data = [3, 1, 4, 1, 5, 9, 2, 6];
const mean = data.reduce((a, b) => a + b, 0) / data.length;
const s = [...data].sort((a, b) => a - b);
const m = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
console.log(\`mean=\${mean} median=\${m}\`);
`,
];

function model(turn /*, task, feedback */) {
  return ATTEMPTS[turn] ?? null;
}

async function main() {
  console.log(`sdk: ${from}`);
  console.log(`task: ${TASK}`);
  const sbx = await Sandbox.create({ workdir: "/work", labels: { example: "agent-loop-ts" } }); // SANDFORT_BASE_URL / SANDFORT_API_KEY
  try {
    console.log(`sandbox ${sbx.id} is ${sbx.state}`);
    await sbx.files.write("/work/test_stats.js", TEST);
    let feedback = null;
    for (let turn = 0; ; turn++) {
      const code = model(turn, TASK, feedback);
      if (code === null) {
        console.log(`FAILED: no attempt passed after ${turn} tries`);
        return 1;
      }
      await sbx.files.write("/work/stats.js", code);
      const r = await sbx.commands.run("node test_stats.js", { cwd: "/work", timeoutS: 30 });
      if (r.exitCode === 0) {
        const out = (await sbx.commands.run("node stats.js", { cwd: "/work" })).stdout.trim();
        console.log(`attempt ${turn + 1}: exit_code=0`);
        console.log(`attempt ${turn + 1} passed: ${out}`);
        console.log(`PASSED after ${turn + 1} attempts`);
        return 0;
      }
      const lines = r.stderr.split("\n");
      const why = lines.find((l) => /Error|unexpected/.test(l)) ?? lines[0];
      console.log(`attempt ${turn + 1}: exit_code=${r.exitCode} stderr: ${why.trim()}`);
      feedback = { exitCode: r.exitCode, stderr: r.stderr };
    }
  } finally {
    await sbx.kill(); // deletes the sandbox
  }
}

try {
  process.exitCode = await main();
} catch (e) {
  if (e instanceof SandfortError) console.error(`sandfort error: ${e.message} (${e.code}, ${e.requestId})`);
  else console.error(e);
  process.exitCode = 1;
}
