const srp = require('stapel-runner-protocol');
const { native, SCRATCH } = require('../dist/native.js');
const FRAME = '{"schema_version":1,"type":"task.progress","task_id":"T-0042","seq":17,"kind":"usage","attempt":1,"payload":{"usage":{"fresh_input":1200,"output":340,"cache_read":5000,"cache_write":0,"thinking":120}}}';
const N = 200000;
const frames = Array.from({ length: N }, (_, i) => FRAME.replace('"seq":17', `"seq":${i + 1}`));
function hubH() { const h = native.sessionNew('hub', JSON.stringify({ ping_interval_ms: 0, peer_timeout_ms: 0 }), undefined, undefined);
  native.sessionInput(h, 0, 0); native.sessionInput(h, 0, 3, srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' })); native.sessionDrain(h); return h; }
for (let rep = 0; rep < 3; rep++) {
  let h = hubH(); let t = process.hrtime.bigint();
  for (let i = 0; i < N; i += 256) native.sessionFrames(h, 1, frames.slice(i, i + 256));
  console.log('native batch', (N / (Number(process.hrtime.bigint() - t) / 1e9)).toFixed(0));
  h = hubH(); t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) { native.sessionInput(h, 1, 3, frames[i]); if ((i & 63) === 63) native.sessionDrain(h); }
  console.log('native per frame + drain/64', (N / (Number(process.hrtime.bigint() - t) / 1e9)).toFixed(0));
  h = hubH(); t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) { native.sessionInput(h, 1, 3, frames[i]); }
  console.log('native input only', (N / (Number(process.hrtime.bigint() - t) / 1e9)).toFixed(0));
  t = process.hrtime.bigint();
  native.sessionDrain(h);
  console.log('drain all', (N / (Number(process.hrtime.bigint() - t) / 1e9)).toFixed(0));
}
