// Area `contract` through the public contract API.
import * as srp from 'stapel-runner-protocol';
import { same, steps } from './common.mjs';

function checkError(i, got, want) {
  if (typeof want !== 'object' || want === null) throw new Error(`step ${i}: expect.error must be an object`);
  for (const [k, w] of Object.entries(want)) same(i, `error.${k}`, got[k] ?? null, w);
}

function outcome(i, f, expect) {
  let value;
  let error;
  try {
    value = f();
  } catch (e) {
    if (!(e instanceof srp.RunnerProtocolError)) throw e;
    error = e;
  }
  if (error === undefined && expect.error === undefined) same(i, 'value', value ?? null, expect.value ?? null);
  else if (error !== undefined && expect.error !== undefined) checkError(i, errorForm(error), expect.error);
  else if (error === undefined) throw new Error(`step ${i}: expected error ${JSON.stringify(expect.error)}, got value ${JSON.stringify(value)}`);
  else throw new Error(`step ${i}: unexpected error ${error.code}: ${error.message}`);
}

function errorForm(e) {
  if (e instanceof srp.ContractError) return { code: e.code, model: e.model, field: e.field };
  if (e instanceof srp.ResolutionRefused) return { code: e.code, reasons: e.reasons };
  return { code: e.code };
}

export function run(vector) {
  const cfg = vector.config ?? {};
  let gateway;
  let reinSession;
  const sessionIds = new srp.SessionIds();
  const catalog = cfg.catalog ?? {};
  for (const [i, input, expect] of steps(vector)) {
    const now = input.now_ms ?? 0;
    if (input.parse !== undefined) {
      outcome(i, () => srp.parseModel(input.parse.model, input.parse.value), expect);
    } else if (input.model_names !== undefined) {
      outcome(i, () => srp.contractModelNames(), expect);
    } else if (input.parse_catalog !== undefined) {
      outcome(i, () => srp.parseCatalog(input.parse_catalog), expect);
    } else if (input.resolve !== undefined) {
      let got;
      let refusal;
      try {
        const r = srp.resolveProfile(input.resolve, catalog);
        got = { profile_id: r.profile.profile_id, rein_id: r.rein.rein_id };
      } catch (e) {
        if (!(e instanceof srp.RunnerProtocolError)) throw e;
        refusal = errorForm(e);
      }
      if (got !== undefined && expect.refusal === undefined) same(i, 'resolved', got, expect.resolved);
      else if (refusal !== undefined && expect.refusal !== undefined) checkError(i, refusal, expect.refusal);
      else if (got !== undefined) throw new Error(`step ${i}: expected refusal, got ${JSON.stringify(got)}`);
      else throw new Error(`step ${i}: unexpected refusal ${JSON.stringify(refusal)}`);
    } else if (input.safe_identifier !== undefined) {
      outcome(i, () => srp.safeIdentifier(input.safe_identifier, input.kind), expect);
    } else if (input.looks_like_credential !== undefined) {
      outcome(i, () => srp.looksLikeCredential(input.looks_like_credential), expect);
    } else if (input.is_sensitive_key !== undefined) {
      outcome(i, () => srp.isSensitiveKey(input.is_sensitive_key), expect);
    } else if (input.is_credential_reference !== undefined) {
      outcome(i, () => srp.isCredentialReference(input.is_credential_reference), expect);
    } else if (input.gateway !== undefined) {
      gateway ??= new srp.GatewayMachine({
        catalog,
        max_tool_calls: cfg.max_tool_calls,
        max_evidence_refs: cfg.max_evidence_refs,
        max_evidence_artifacts: cfg.max_evidence_artifacts,
      });
      let error;
      try {
        gateway.handleInput(now, input.gateway);
      } catch (e) {
        if (!(e instanceof srp.RunnerProtocolError)) throw e;
        error = e;
      }
      const outputs = [];
      for (let o = gateway.pollOutput(); o !== null; o = gateway.pollOutput()) {
        outputs.push(o);
        if (outputs.length > 64) throw new Error(`step ${i}: gateway does not settle`);
      }
      if (error === undefined && expect.error !== undefined) throw new Error(`step ${i}: expected error ${JSON.stringify(expect.error)}`);
      if (error !== undefined && expect.error === undefined) throw new Error(`step ${i}: unexpected error ${error.code}: ${error.message}`);
      if (error !== undefined) checkError(i, { code: error.code }, expect.error);
      same(i, 'outputs', outputs, expect.outputs ?? []);
      if (expect.finished !== undefined) same(i, 'finished', gateway.isFinished, expect.finished);
      if (expect.stage !== undefined) same(i, 'stage', gateway.stage, expect.stage);
      same(i, 'poll_timeout', gateway.pollTimeout(), null);
    } else if (input.rein_role_spec !== undefined) {
      outcome(i, () => srp.rein.roleSpec(input.rein_role_spec), expect);
    } else if (input.rein_session_map !== undefined) {
      outcome(i, () => srp.rein.sessionMap(input.rein_session_map.n, input.rein_session_map.sandbox), expect);
    } else if (input.rein_initial_prompt !== undefined) {
      outcome(i, () => srp.rein.initialPrompt(input.rein_initial_prompt), expect);
    } else if (input.rein_start !== undefined) {
      reinSession = new srp.ReinSession(input.rein_start, now);
      outcome(i, () => null, expect);
    } else if (input.rein_tool_call_prompt !== undefined) {
      if (reinSession === undefined) throw new Error(`step ${i}: no rein_start`);
      outcome(i, () => reinSession.toolCallPrompt(input.rein_tool_call_prompt), expect);
    } else if (input.rein_turn !== undefined) {
      if (reinSession === undefined) throw new Error(`step ${i}: no rein_start`);
      outcome(i, () => reinSession.recordTurn(input.rein_turn), expect);
    } else if (input.rein_open_session !== undefined) {
      outcome(i, () => sessionIds.open(input.rein_open_session), expect);
    } else if (input.rein_tool_result !== undefined) {
      outcome(i, () => srp.rein.toolResult(input.rein_tool_result), expect);
    } else if (input.rein_turn_error !== undefined) {
      outcome(i, () => srp.rein.toolResultFromTurnError(input.rein_turn_error.code, input.rein_turn_error.message), expect);
    } else if (input.rein_summary !== undefined) {
      if (reinSession === undefined) throw new Error(`step ${i}: no rein_start`);
      outcome(i, () => reinSession.summary(now), expect);
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    if (expect.usage !== undefined || expect.tool_calls !== undefined) {
      if (reinSession === undefined) throw new Error(`step ${i}: usage and tool_calls need a rein_start`);
      if (expect.usage !== undefined) same(i, 'usage', reinSession.usage(), expect.usage);
      if (expect.tool_calls !== undefined) same(i, 'tool_calls', reinSession.toolCalls, expect.tool_calls);
    }
  }
}
