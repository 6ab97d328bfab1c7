// The Node package's HubServer under `stapel-conformance hub`:
//
//   node conformance/scenarios/targets/node-hub-server.mjs --token-file F [--port 0] [--assign T-1]…
//   stapel-conformance hub --url URL --token-file F --report DIR
//
// A minimal hub on `stapel-runner-protocol/transport-ws`'s HubServer: the token in the
// file authenticates runner id `runner`, each `--assign` task is sent to that runner
// (kept for replay until it acknowledges), and the runner's events are taken as they come
// (progress and reports printed as JSON lines). The first stdout line is
// `{"listening": "ws://127.0.0.1:PORT/"}`. Everything the protocol decides is the
// server's (the core's). The package is taken from STAPEL_NODE_PACKAGE (default:
// bindings-node of this tree).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = process.env.STAPEL_NODE_PACKAGE ?? join(here, '..', '..', '..', 'bindings-node');
const require = createRequire(join(pkg, 'package.json'));
const { HubServer } = require('./dist/transport-ws.js');

const { values } = parseArgs({
  options: {
    'token-file': { type: 'string' },
    port: { type: 'string', default: '0' },
    assign: { type: 'string', multiple: true, default: [] },
    backend: { type: 'string', default: 'fake' },
  },
});
const token = readFileSync(values['token-file'], 'utf8').trim();
const server = new HubServer({ tokens: { [token]: 'runner' } });
const port = await server.listen(Number(values.port));
const runner = server.runner('runner');
for (const taskId of values.assign) {
  const goal = 'run the task';
  runner.send({
    type: 'task.assign',
    task_id: taskId,
    task: { schema_version: 1, id: taskId, type: 'code', goal, criteria: [{ id: 'c1', text: goal }], budget: { iterations: 1 } },
    role: 'coder',
    invocation: { backend: values.backend },
    attempt: 1,
  });
}
const print = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
print({ listening: `ws://127.0.0.1:${port}/` });
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close().then(() => process.exit(0)));
}
// Take every runner's events (the queue is bounded: untaken events pause the socket).
(async () => {
  for (;;) {
    const other = await server.accept();
    if (other !== runner) (async () => { for await (const e of other) print({ runner: other.runnerId, event: e.kind }); })();
  }
})();
for await (const e of runner) {
  if (e.kind === 'received') print({ received: e.message });
  else print({ event: e.kind });
}
