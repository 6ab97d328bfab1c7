// The I/O shells over the core's machines: SubprocessAdapter / SubprocessSession (a real
// child process, node:child_process) and the Gateway driver with the reference
// SubprocessRein and a sandboxer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as srp from 'stapel-runner-protocol';

const here = dirname(fileURLToPath(import.meta.url));
const harness = [process.execPath, join(here, 'fixtures', 'jsonl_harness.mjs')];
const role = srp.roleSpecFromInvocation({});

test('a subprocess session runs turns, reports progress and harness errors, and keeps the environment cleared', async () => {
  const progress = [];
  const adapter = new srp.SubprocessAdapter({ command: harness, env: { EXTRA: '1' }, onProgress: (e) => progress.push(e) });
  const session = await adapter.openSession({ ...role, llm_base_url: 'http://127.0.0.1:4000' });
  try {
    const r = await session.turn('hi');
    assert.deepEqual(r, { text: 'echo:hi', usage: { fresh_input: 3, output: 2, cache_read: 0, cache_write: 0, thinking: 1 } });
    await session.turn('progress');
    assert.deepEqual(progress, [{ type: 'progress', step: 1 }]);
    await assert.rejects(session.turn('fail'), (e) => e instanceof srp.AdapterError && e.code === 'harness_error' && e.details.message === 'boom');
    assert.equal(session.closed, false, 'a harness error leaves the session usable');
    const env = (await session.turn('env')).text.split(',');
    assert.deepEqual(env.filter((k) => !['PWD', 'SHLVL', '_'].includes(k)), ['ANTHROPIC_BASE_URL', 'EXTRA', 'PATH']);
  } finally {
    await adapter.close();
  }
  assert.equal(session.closed, true);
  await assert.rejects(session.turn('late'), (e) => e instanceof srp.AdapterError);
  assert.equal((await new srp.SubprocessAdapter({ command: harness }).oneshot(role, 'x')).text, 'echo:x');
});

test('close escalates as the core says: stdin closed, TERM ignored, KILL to the group', async () => {
  const adapter = new srp.SubprocessAdapter({ command: [...harness, '--stubborn'], graceMs: 50 });
  const session = await adapter.openSession(role);
  assert.equal((await session.turn('a')).text, 'echo:a');
  const exit = new Promise((resolve) => session.process.on('exit', (code, signal) => resolve(signal)));
  const t0 = performance.now();
  await session.close();
  assert.equal(await exit, 'SIGKILL');
  assert.ok(performance.now() - t0 >= 100, 'after the grace for stdin and the grace for TERM');
  assert.equal(session.closed, true);
});

test('a command that cannot start is the core\'s spawn_failed', async () => {
  const adapter = new srp.SubprocessAdapter({ command: ['/nonexistent/harness'] });
  await assert.rejects(adapter.openSession(role), (e) => e instanceof srp.AdapterError && e.code === 'spawn_failed');
  await assert.rejects(new srp.SubprocessAdapter({ command: [] }).openSession(role), (e) => e instanceof srp.AdapterError);
});

const catalog = {
  profiles: [{ contract_version: '1.0', profile_id: 'coder-default', rein: 'sub', model: 'm-1', sandbox_profile: 'repo-rw', tool_policy: { allowed_tools: ['read_file'] } }],
  reins: [{ rein_id: 'sub', contract_version: '1.0', tool_event_visibility: 'complete' }],
};
const request = { harness_profile_ref: 'coder-default', repository: 'github.com/acme/widgets', title: 'Fix it', description: 'Now.' };

test('the Gateway drives the core machine with a SubprocessRein and a sandboxer, tearing down on every path', async () => {
  const calls = [];
  const sandboxer = {
    create: async (ref, profile, repo) => {
      calls.push(['create', ref, profile, repo]);
      return { sandbox_id: 'sb-1' };
    },
    destroy: (sandbox) => {
      calls.push(['destroy', sandbox.sandbox_id]);
    },
  };
  const subRein = new srp.SubprocessRein({ command: harness });
  const gateway = new srp.Gateway(catalog, { reins: { sub: subRein }, sandboxer });
  try {
    const result = await gateway.execute(request, { inputs: { prompt: 'start' }, toolCalls: [{ call_id: 'c1', name: 'read_file', arguments: { path: 'a' } }] });
    assert.equal(result.ok, true, JSON.stringify(result));
    assert.equal(result.evidence.outcome, 'succeeded');
    assert.equal(result.evidence.rein_id, 'sub');
    assert.deepEqual(calls, [['create', 'coder-default', 'repo-rw', 'github.com/acme/widgets'], ['destroy', 'sb-1']]);

    // A rein whose dispatch throws fails that stage; the message reaches the caller only.
    const failing = {
      startSession: () => ({ session_id: 's-1' }),
      dispatchTool: () => {
        throw new Error('secret detail');
      },
      endSession: () => ({ tokens: { cache_read: 0, cache_write: 0, fresh_input: 0, output: 0, thinking: 0 }, duration_ms: 1, tool_event_visibility: 'complete', tool_event_count: 0 }),
    };
    calls.length = 0;
    const failed = await new srp.Gateway(catalog, { reins: { sub: failing }, sandboxer }).execute(request, { toolCalls: [{ call_id: 'c1', name: 'read_file' }] });
    assert.equal(failed.ok, false);
    assert.equal(failed.evidence.outcome, 'failed');
    assert.equal(failed.tool_error, 'secret detail');
    assert.ok(!JSON.stringify(failed.evidence).includes('secret detail'), 'never in evidence');
    assert.deepEqual(calls.at(-1), ['destroy', 'sb-1']);
    // An unknown profile is refused by the core before anything is created.
    calls.length = 0;
    const refused = await gateway.execute({ ...request, harness_profile_ref: 'nope' });
    assert.equal(refused.evidence.outcome, 'refused');
    assert.deepEqual(calls, []);
  } finally {
    await subRein.close();
  }
});
