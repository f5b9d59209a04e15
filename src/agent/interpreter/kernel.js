// The JavaScript kernel of a code context (src/agent/interpreter/kernel.hpp has the protocol).
// sandfort-agent carries this file in its binary and writes it into the sandbox when it starts
// a context, so any image with node has a stateful interpreter. Node's own modules only.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const readline = require('readline');

const REQUESTS = 3;
const EVENTS = 4;

function send(event) {
  fs.writeSync(EVENTS, JSON.stringify(event) + '\n');
}

function bundle(value) {
  const out = { text: typeof value === 'string' ? util.inspect(value) : util.inspect(value, { depth: 4 }) };
  if (value && typeof value === 'object') {
    // An object may say how it shows itself, as a notebook's display data.
    const rich = typeof value._toHtml === 'function' ? value._toHtml() : undefined;
    if (typeof rich === 'string') out.html = rich;
  }
  return out;
}

globalThis.display = (...values) => {
  for (const value of values) send({ type: 'result', ...bundle(value), is_main_result: false });
};
globalThis.require = require;
// SIGINT interrupts the code running (vm's breakOnSigint); between runs it does nothing.
process.on('SIGINT', () => {});

function errorEvent(err) {
  if (err instanceof Error || (err && typeof err === 'object' && 'stack' in err)) {
    const stack = String(err.stack || '');
    const kept = stack.split('\n').filter((line) => !line.includes('kernel.js') && !line.includes('node:vm') && !line.includes('node:internal'));
    return { type: 'error', name: err.name || 'Error', value: err.message || String(err), traceback: kept.join('\n') };
  }
  return { type: 'error', name: 'Error', value: util.inspect(err), traceback: '' };
}

let number = 0;
async function execute(request) {
  number += 1;
  const saved = {};
  for (const [key, value] of Object.entries(request.env || {})) {
    saved[key] = process.env[key];
    process.env[key] = value;
  }
  try {
    const script = new vm.Script(request.code, { filename: `<cell ${number}>` });
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) send({ type: 'result', ...bundle(value), is_main_result: true });
  } catch (err) {
    send(errorEvent(err));
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
  send({ type: 'done' });
}

const input = readline.createInterface({ input: fs.createReadStream(null, { fd: REQUESTS }) });
let queue = Promise.resolve();
input.on('line', (line) => {
  const request = JSON.parse(line);
  queue = queue.then(() => execute(request));
});
input.on('close', () => process.exit(0));
// An error thrown later (a timer, a promise nobody awaited) goes to stderr; the kernel lives on.
process.on('uncaughtException', (err) => process.stderr.write(String((err && err.stack) || err) + '\n'));
send({ type: 'ready', pid: process.pid });
