// E2B's quickstart, unchanged: this file imports only the `e2b` SDK and knows nothing of Sandfort.
// What makes it run against sandfortd is the environment (docs/e2b.md):
//
//   export E2B_API_URL=https://sandfort.example.com/e2b
//   export E2B_SANDBOX_URL=https://sandfort.example.com/e2b-sandbox
//   export E2B_API_KEY=sfk_...                      # a Sandfort API key
//   cd examples/e2b && npm install && node quickstart.mjs
import { Sandbox } from "e2b";

const sandbox = await Sandbox.create();
try {
  const result = await sandbox.commands.run('echo "Hello from E2B!"');
  console.log(result.stdout.trim());

  await sandbox.files.write("/home/user/hello.py", 'print("hello from a file")\n');
  const run = await sandbox.commands.run("python3 /home/user/hello.py");
  console.log(run.stdout.trim());

  const entries = await sandbox.files.list("/home/user");
  console.log("files:", entries.map((e) => e.name).join(" "));

  await sandbox.commands.run("exit 3").catch((err) => console.log(`${err.name}: exit code ${err.exitCode}`));
} finally {
  await sandbox.kill();
}
