// E2B's code-interpreter quickstart, unchanged, against Sandfort: only the environment differs.
//
//   export E2B_API_URL=https://sandfort.example.com/e2b
//   export E2B_SANDBOX_URL=https://sandfort.example.com/e2b-sandbox
//   export E2B_API_KEY=sfk_...                 # a Sandfort member key
//   cd examples/e2b && npm install && node code_interpreter.mjs
//
// The default template (code-interpreter-v1) is Sandfort's sandfort/code-interpreter:bookworm
// image (scripts/build-code-interpreter-image). docs/e2b.md, "Code interpreter".
import { Sandbox } from "@e2b/code-interpreter";

const sbx = await Sandbox.create();
try {
  await sbx.runCode("x = 1");
  const execution = await sbx.runCode("x += 1; x");
  console.log(execution.text); // outputs 2

  const chart = await sbx.runCode(`
import matplotlib.pyplot as plt
plt.plot([1, 2, 3, 4], [1, 4, 9, 16])
plt.title("squares")
plt.show()
`);
  console.log("figure:", chart.results[0].formats()); // [ 'png' ]

  const failed = await sbx.runCode("undefined_name");
  console.log("error:", failed.error.name, failed.error.value);

  await sbx.runCode("console.log('hello from js')", {
    language: "js",
    onStdout: (out) => process.stdout.write(out.line),
  });
} finally {
  await sbx.kill();
}
