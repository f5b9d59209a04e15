// The `prepare` script: builds dist/ (ESM, CommonJS, declarations) from src/.
//
// npm runs `prepare` in this folder on `npm ci` / `npm install` here, before `npm pack` and
// `npm publish`, and (checked with npm 10.9 and 11.19) when another project
// installs the folder itself: `npm install /path/to/sandfort/sdk/typescript` links the folder
// into that project's node_modules and runs this script in it. In a fresh clone the folder has no
// node_modules, so the pinned devDependencies (TypeScript, @types/node; package-lock.json) are
// installed here first, with the scripts of those packages off. dist/ and node_modules/ are not
// in git (.gitignore); the tarball of `npm pack` carries dist/ and nothing to build.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..");

// The npm that runs this script (npm_execpath is its CLI file); `npm` on PATH otherwise.
function npm(args) {
  const cli = process.env.npm_execpath;
  const [cmd, argv] = cli && cli.endsWith(".js") ? [process.execPath, [cli, ...args]] : ["npm", args];
  // Settings of the outer command that must not steer the install here: installing globally,
  // into another prefix, without dev dependencies, or saving into a package.json.
  const env = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^npm_config_(global|location|prefix|local_prefix|omit|include|only|production|dry_run|save.*|ignore_scripts|install_links|workspaces?|package_lock_only|json|pack_destination)$/i.test(k)) {
      delete env[k];
    }
  }
  // Their output goes to stderr: stdout may be the outer command's answer (`npm pack --json`).
  const r = spawnSync(cmd, argv, { cwd: pkgDir, env, stdio: ["ignore", 2, 2], shell: process.platform === "win32" });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    console.error(`@sandfort/sdk prepare: \`npm ${args.join(" ")}\` in ${pkgDir} failed (exit ${r.status})`);
    process.exit(r.status ?? 1);
  }
}

if (!existsSync(join(pkgDir, "src", "index.ts"))) {
  process.exit(0); // an installed copy (a tarball's contents): dist/ is there, nothing to build
}
if (!existsSync(join(pkgDir, "node_modules", "typescript", "bin", "tsc"))) {
  console.error(`@sandfort/sdk prepare: installing the build tools (devDependencies) in ${pkgDir}`);
  npm(["ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund"]);
}
npm(["run", "build"]);
