// The CommonJS entry: require() gives the same API as import.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const srp = require('stapel-runner-protocol');

test('require() exposes the API and its error classes', async () => {
  const esm = await import('stapel-runner-protocol');
  assert.equal(esm.decode, srp.decode);
  assert.equal(esm.SchemaValidationError, srp.SchemaValidationError);
  const names = Object.keys(srp).filter((n) => n !== '__esModule');
  for (const name of names) assert.ok(name in esm, `${name} missing from the ESM entry`);
  const msg = srp.decode('{"schema_version":1,"type":"pong","nonce":7}', { validate: true });
  assert.deepEqual(msg, { schema_version: 1, type: 'pong', nonce: 7 });
  assert.throws(() => srp.decode('[]'), (e) => e instanceof srp.DecodeError && e.code === 'not_object');
});
