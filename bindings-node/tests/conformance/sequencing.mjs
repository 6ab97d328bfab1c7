// Area `sequencing` through the public ConnectionState.
import * as srp from 'stapel-runner-protocol';
import { attempt, bytesOf, checkError, same, steps } from './common.mjs';

export function run(vector) {
  const { role, ...config } = vector.config ?? {};
  if (role !== 'hub' && role !== 'runner') throw new Error('config.role must be "hub" or "runner"');
  let state = new srp.ConnectionState(role, config);
  for (const [i, input, expect] of steps(vector)) {
    const restore = bytesOf(input, 'restore');
    const pos = (p) => [p.task_id, p.attempt, p.seq];
    if (input.emit !== undefined) {
      const before = JSON.stringify(input.emit);
      const o = attempt(() => state.emit(input.emit));
      if (checkError(i, o, expect)) {
        if (expect.frame !== undefined) same(i, 'frame', srp.encode(o.value), expect.frame);
      } else if (JSON.stringify(input.emit) !== before) {
        throw new Error(`step ${i}: emit error changed the message`);
      }
    } else if (input.receive !== undefined || input.classify !== undefined) {
      const o = attempt(() => (input.receive !== undefined ? state.receive(input.receive) : state.classify(input.classify)));
      if (checkError(i, o, expect) && expect.arrival !== undefined) same(i, 'arrival', o.value, expect.arrival);
    } else if (input.resume_map !== undefined) {
      same(i, 'resume_map', state.resumeMap(), expect.resume_map);
    } else if (input.replay_for !== undefined) {
      same(i, 'replay', state.replayFor(input.replay_for), expect.replay);
    } else if (input.replay_positions !== undefined) {
      same(i, 'replay', state.replayPositions(input.replay_positions), expect.replay);
    } else if (input.ack !== undefined) {
      const o = attempt(() => state.ack(...pos(input.ack)));
      if (checkError(i, o, expect)) same(i, 'dropped', o.value, expect.dropped);
    } else if (input.last_received !== undefined) {
      same(i, 'value', state.channel(input.last_received).last_received, expect.value);
    } else if (input.skip_to !== undefined) {
      const o = attempt(() => state.skipTo(...pos(input.skip_to)));
      if (checkError(i, o, expect)) same(i, 'gap', o.value, expect.gap ?? null);
    } else if (input.ack_positions !== undefined) {
      same(i, 'positions', state.ackPositions(), expect.positions);
    } else if (input.replay_from !== undefined) {
      same(i, 'positions', state.replayFrom(), expect.positions);
    } else if (input.unacked !== undefined) {
      same(i, 'frames', state.unacked(), expect.frames);
    } else if (input.forget_task !== undefined) {
      same(i, 'known', state.forgetTask(input.forget_task), expect.known);
    } else if (input.mark_unconfirmed !== undefined) {
      state.markUnconfirmed();
    } else if (input.confirm_all !== undefined) {
      state.confirmAll();
    } else if (input.trim_through !== undefined) {
      same(i, 'dropped', state.trimThrough(...pos(input.trim_through)), expect.dropped);
    } else if (input.is_fully_acknowledged !== undefined) {
      same(i, 'value', state.isFullyAcknowledged(input.is_fully_acknowledged), expect.value);
    } else if (input.is_forgotten !== undefined) {
      same(i, 'value', state.isForgotten(input.is_forgotten), expect.value);
    } else if (input.channel !== undefined) {
      const o = attempt(() => state.channel(input.channel));
      if (checkError(i, o, expect)) same(i, 'channel', o.value, expect.channel);
    } else if (input.outbox_since !== undefined) {
      const o = attempt(() => state.outboxSince(...pos(input.outbox_since)));
      if (checkError(i, o, expect)) same(i, 'frames', o.value.map((m) => srp.encode(m)), expect.frames);
    } else if (input.snapshot_roundtrip !== undefined) {
      const bytes = state.snapshot();
      const restored = srp.ConnectionState.restore(bytes);
      if (!restored.equals(state) || !restored.snapshot().equals(bytes)) {
        throw new Error(`step ${i}: snapshot round trip changed the state`);
      }
      state = restored;
    } else if (restore !== undefined) {
      const o = attempt(() => srp.ConnectionState.restore(restore));
      if (checkError(i, o, expect)) state = o.value;
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    if (expect.outbox !== undefined) same(i, 'outbox', { frames: state.outboxFrames, bytes: state.outboxBytes }, expect.outbox);
    if (expect.streams !== undefined) same(i, 'streams', state.streamCounts(), expect.streams);
    if (expect.confirmed !== undefined) same(i, 'confirmed', state.isConfirmed, expect.confirmed);
  }
}
