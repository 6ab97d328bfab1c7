// Runs in a page served with a strict Content-Security-Policy and no inline script
// (api.test.mjs): the browser build must load and work under it.
const violations = [];
document.addEventListener('securitypolicyviolation', (e) => violations.push(`${e.violatedDirective} ${e.blockedURI}`));

window.__done = (async () => {
  const srp = await import('/dist/stapel-runner-protocol.js');
  const m = srp.decode('{"schema_version":1,"type":"task.progress","task_id":"T","seq":1,"kind":"k","payload":{}}', { validate: true });
  const r = new srp.SessionReducer({ run_id: 'run_local' });
  // Violation events are queued tasks: let them arrive.
  await new Promise((done) => setTimeout(done, 250));
  return { seq: m.seq, snapshot: typeof r.snapshot(), violations };
})();
