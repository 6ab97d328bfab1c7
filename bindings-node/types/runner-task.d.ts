/**
 * Evaluate one decision of the connected runner's task policy: a one-key call such as
 * `{ backoff: {...} }`, `{ admit: {...} }` or `{ report: {...} }` (see the core's
 * `runner_task::call`); its JSON result. A malformed call throws `ProtocolStateError`
 * (code `invalid_call`).
 */
export declare function runnerTaskCall(request: Record<string, unknown>): unknown;
