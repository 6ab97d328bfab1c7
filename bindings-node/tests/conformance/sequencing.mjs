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
      const o = attempt(() => (input.receive !== undefined ? state.receiveArrival(input.receive) : state.classify(input.classify)));
      if (checkError(i, o, expect) && expect.arrival !== undefined) same(i, 'arrival', o.value, expect.arrival);
    } else if (input.resume_map !== undefined) {
      same(i, 'resume_map', state.resumeMap(), expect.resume_map);
    } else if (input.replay_for !== undefined) {
      same(i, 'replay', state.replayReport(input.replay_for), expect.replay);
    } else if (input.replay_positions !== undefined) {
      same(i, 'replay', state.replayPositions(input.replay_positions), expect.replay);
    } else if (input.ack !== undefined) {
      const o = attempt(() => state.ack(...pos(input.ack)));
      if (checkError(i, o, expect)) same(i, 'dropped', o.value, expect.dropped);
    } else if (input.last_received !== undefined) {
      same(i, 'value', state.channel(input.last_received).lastReceived, expect.value);
    } else if (input.skip_to !== undefined) {
      const o = attempt(() => state.skipTo(...pos(input.skip_to)));
      if (checkError(i, o, expect)) same(i, 'gap', o.value, expect.gap ?? null);
    } else if (input.ack_positions !== undefined) {
      same(i, 'positions', state.ackPositions(), expect.positions);
    } else if (input.replay_from !== undefined) {
      same(i, 'positions', state.replayFrom(), expect.positions);
    } else if (input.unacked !== undefined) {
      same(i, 'frames', state.unacked().map((u) => u.frame), expect.frames);
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
      if (checkError(i, o, expect)) {
        const c = o.value;
        same(i, 'channel', { outbound: c.outbound.length, inbound: c.inbound.length, last_received: c.lastReceived }, expect.channel);
      }
    } else if (input.outbox_since !== undefined) {
      const o = attempt(() => state.outboxSince(...pos(input.outbox_since)));
      if (checkError(i, o, expect)) same(i, 'frames', o.value.map((m) => srp.encode(m)), expect.frames);
    } else if (input.outbox_log !== undefined) {
      same(i, 'results', standaloneOutbox(input.outbox_log), expect.results);
    } else if (input.inbox_tracker !== undefined) {
      const { arrivals, lastSeq } = standaloneInbox(input.inbox_tracker);
      same(i, 'arrivals', arrivals, expect.arrivals);
      same(i, 'last_seq', lastSeq, expect.last_seq);
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

/** `outbox_log`: one standalone OutboxLog, fresh for the step; the result of every op. */
function standaloneOutbox(spec) {
  const bounds = {};
  for (const k of ['max_frames', 'max_bytes']) if (spec[k] !== undefined) bounds[k] = spec[k];
  const log = new srp.OutboxLog(bounds);
  return spec.ops.map((op) => {
    if (op.emit !== undefined) {
      const before = JSON.stringify(op.emit);
      const o = attempt(() => log.emit(op.emit));
      if (o.error !== undefined) {
        if (typeof o.error?.code !== 'string') throw o.error;
        if (JSON.stringify(op.emit) !== before) throw new Error('emit error changed the message');
        return { error: o.error.code };
      }
      return { frame: srp.encode(o.value) };
    }
    if (op.ack !== undefined) return { dropped: log.ack(op.ack) };
    if (op.since !== undefined) {
      const o = attempt(() => log.since(op.since));
      if (o.error !== undefined) {
        if (typeof o.error?.code !== 'string') throw o.error;
        return { error: o.error.code };
      }
      return { frames: o.value.map((m) => srp.encode(m)) };
    }
    if (op.last_seq !== undefined) return { value: log.lastSeq };
    throw new Error(`unknown outbox_log op ${JSON.stringify(op)}`);
  });
}

/** `inbox_tracker`: one standalone InboxTracker; every arrival and the final watermark. */
function standaloneInbox(spec) {
  const tracker = new srp.InboxTracker(spec.window === undefined ? {} : { window: spec.window });
  const arrivals = spec.receive.map((seq) => {
    const o = attempt(() => tracker.receiveArrival(seq));
    if (o.error === undefined) return o.value;
    if (typeof o.error?.code !== 'string') throw o.error;
    return { error: o.error.code };
  });
  return { arrivals, lastSeq: tracker.lastSeq };
}
