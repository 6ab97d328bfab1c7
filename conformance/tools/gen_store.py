#!/usr/bin/env python3
"""Writes conformance/vectors/store/*.json (what a hub persists: rows, writes, takeover,
close policy; core/src/store/) and conformance/vectors/lease/*.json (the lease timing
machine). Expectations are written out by hand here from the rules in the module docs
(not computed by the core). Run: python3 conformance/tools/gen_store.py"""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "vectors"


def enc(obj):
    return json.dumps(obj, separators=(",", ":"))


HELLO = enc({"schema_version": 1, "type": "hello", "protocol_version": 1,
             "project_id": "p-1", "runner_version": "0.1.0"})


def hello(resume=None):
    h = {"schema_version": 1, "type": "hello", "protocol_version": 1,
         "project_id": "p-1", "runner_version": "0.1.0"}
    if resume is not None:
        h["resume"] = resume
    return enc(h)


def progress(task, seq, attempt, state):
    return enc({"schema_version": 1, "type": "task.progress", "task_id": task, "seq": seq,
                "kind": "state", "attempt": attempt, "payload": {"state": state}})


def cancel_msg(task, reason):
    return {"schema_version": 1, "type": "task.cancel", "task_id": task, "reason": reason}


def cancel_frame(task, reason, seq):
    return enc({"schema_version": 1, "type": "task.cancel", "task_id": task,
                "reason": reason, "seq": seq})


def ping(nonce, ack=None):
    p = {"schema_version": 1, "type": "ping", "nonce": nonce}
    if ack is not None:
        p["ack"] = ack
    return enc(p)


def task_row(task, next_seq, assigned=0, forgotten=False):
    return {"task_id": task, "next_seq": next_seq, "assigned_attempt": assigned,
            "forgotten": forgotten}


def put_task(task, next_seq, assigned=0, forgotten=False):
    return {"op": "put_task", **task_row(task, next_seq, assigned, forgotten)}


def cmd_row(task, seq, frame):
    return {"task_id": task, "seq": seq, "frame": frame}


def put_command(task, seq, frame):
    return {"op": "put_command", **cmd_row(task, seq, frame)}


def step(input, **expect):
    return {"input": input, "expect": expect}


def write(area, name, description, config, steps):
    out = ROOT / area
    out.mkdir(parents=True, exist_ok=True)
    v = {"description": description, "area": area, "config": config, "steps": steps}
    (out / f"{name}.json").write_text(json.dumps(v, indent=1, ensure_ascii=False) + "\n")


HUB = {"side": "hub", "durable_acks": True}
C1 = cancel_frame("T-1", "a", 1)


def store_vectors():
    write("store", "rows_of_a_live_hub",
          "The rows of a hub session: one tasks row per task (next command seq, assigned "
          "attempt, forgotten), one inbound row per runner stream whose `through` is what the "
          "host confirmed (durable acknowledgements: received is not applied), one commands "
          "row per unacknowledged command, byte for byte; sorted by key",
          HUB,
          [step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15000}]),
           step({"now": 2, "frame": progress("T-2", 1, 1, "a")},
                rows={"tasks": [task_row("T-2", 1)],
                      "inbound": [{"task_id": "T-2", "attempt": 1, "through": 0}],
                      "commands": []}),
           step({"now": 3, "send": cancel_msg("T-1", "a")},
                outputs=[{"transmit": C1}, {"timeout": 15000}],
                rows={"tasks": [task_row("T-1", 2), task_row("T-2", 1)],
                      "inbound": [{"task_id": "T-2", "attempt": 1, "through": 0}],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           step({"now": 4, "confirm": {"task_id": "T-2", "attempt": 1, "seq": 1}},
                rows={"tasks": [task_row("T-1", 2), task_row("T-2", 1)],
                      "inbound": [{"task_id": "T-2", "attempt": 1, "through": 1}],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           ])

    write("store", "rows_without_durable_acks",
          "Without durable acknowledgements an inbound row's `through` is the stream's "
          "watermark (what was delivered)",
          {"side": "hub"},
          [step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15000}]),
           step({"now": 2, "frame": progress("T-1", 1, 3, "a")},
                rows={"tasks": [task_row("T-1", 1)],
                      "inbound": [{"task_id": "T-1", "attempt": 3, "through": 1}],
                      "commands": []}),
           ])

    write("store", "writes_before_outputs",
          "A RowTracker lists the writes a step needs before its outputs go out: a new "
          "command is put (with its task's numbering) before it is sent; nothing changed, "
          "no writes; an acknowledged command is deleted; rolled-back writes are listed "
          "again; inbound rows are never in it (the apply transaction writes them)",
          HUB,
          [step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15000}]),
           step({"now": 2, "send": cancel_msg("T-1", "a"), "poll": False},
                rows={"tasks": [task_row("T-1", 2)], "inbound": [],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           step({"writes": True},
                writes=[put_task("T-1", 2), put_command("T-1", 1, C1)],
                outputs=[{"transmit": C1}, {"timeout": 15000}]),
           step({"writes": True}, writes=[]),
           step({"now": 3, "frame": progress("T-1", 1, 1, "a")},
                outputs=[{"event": {"received": progress("T-1", 1, 1, "a")}},
                         {"timeout": 15000}]),
           step({"writes": "failed"}, writes=[]),
           step({"now": 4, "frame": ping(7, [{"task_id": "T-1", "seq": 1}])},
                outputs=[{"transmit": enc({"schema_version": 1, "type": "pong", "nonce": 7,
                                           "ack": []})},
                         {"timeout": 15000}]),
           step({"writes": "failed"},
                writes=[{"op": "delete_commands", "task_id": "T-1", "through": 1}]),
           step({"writes": True},
                writes=[{"op": "delete_commands", "task_id": "T-1", "through": 1}]),
           step({"writes": True}, writes=[]),
           step({"rows": True},
                rows={"tasks": [task_row("T-1", 2)],
                      "inbound": [{"task_id": "T-1", "attempt": 1, "through": 0}],
                      "commands": []}),
           ])

    write("store", "takeover_rebuilds_from_rows",
          "A takeover: a hub session rebuilt from rows (another hub's) holds exactly them; "
          "after the runner's hello it acknowledges the applied positions, replays the kept "
          "command above the runner's resume byte for byte, drops frames at or below "
          "`through` as duplicates and delivers the rest; new commands continue the numbering",
          HUB,
          [step({"from_rows": {"tasks": [task_row("T-1", 3, 1)],
                               "inbound": [{"task_id": "T-1", "attempt": 1, "through": 2}],
                               "commands": [cmd_row("T-1", 2, cancel_frame("T-1", "b", 2))]}},
                rows={"tasks": [task_row("T-1", 3, 1)],
                      "inbound": [{"task_id": "T-1", "attempt": 1, "through": 2}],
                      "commands": [cmd_row("T-1", 2, cancel_frame("T-1", "b", 2))]}),
           step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": hello({"T-1": 1})},
                outputs=[{"event": {"hello": hello({"T-1": 1})}},
                         {"transmit": ping(1, [{"task_id": "T-1", "attempt": 1, "seq": 2}])},
                         {"transmit": cancel_frame("T-1", "b", 2)},
                         {"timeout": 15000}]),
           step({"now": 2, "frame": progress("T-1", 2, 1, "b")},
                outputs=[{"timeout": 15000}]),
           step({"now": 3, "frame": progress("T-1", 3, 1, "c")},
                outputs=[{"event": {"received": progress("T-1", 3, 1, "c")}},
                         {"timeout": 15000}]),
           step({"now": 4, "send": cancel_msg("T-1", "c")},
                outputs=[{"transmit": cancel_frame("T-1", "c", 3)}, {"timeout": 15000}]),
           step({"writes": True},
                writes=[put_task("T-1", 4, 1), put_command("T-1", 3, cancel_frame("T-1", "c", 3))]),
           ])

    write("store", "rows_round_trip",
          "The rows of a session rebuilt from a live session's rows equal them; the rebuilt "
          "session replays the same kept commands",
          HUB,
          [step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15000}]),
           step({"now": 2, "send": cancel_msg("T-1", "a")},
                outputs=[{"transmit": C1}, {"timeout": 15000}]),
           step({"now": 3, "frame": progress("T-1", 1, 1, "a")},
                outputs=[{"event": {"received": progress("T-1", 1, 1, "a")}},
                         {"timeout": 15000}]),
           step({"now": 4, "confirm": {"task_id": "T-1", "attempt": 1, "seq": 1}},
                outputs=[{"timeout": 204}]),
           step({"from_rows": True},
                rows={"tasks": [task_row("T-1", 2)],
                      "inbound": [{"task_id": "T-1", "attempt": 1, "through": 1}],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           step({"now": 10, "connected": True}, outputs=[{"timeout": 15010}]),
           step({"now": 11, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}},
                         {"transmit": ping(1, [{"task_id": "T-1", "attempt": 1, "seq": 1}])},
                         {"transmit": C1},
                         {"timeout": 15010}]),
           ])

    write("store", "forgotten_task_rows",
          "A forgotten task is a tasks row with `forgotten` and its inbound positions, no "
          "commands; rebuilt from rows it still drops the task's late frames (and acknowledges them)",
          HUB,
          [step({"now": 0, "connected": True}, outputs=[{"timeout": 15000}]),
           step({"now": 1, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15000}]),
           step({"now": 2, "frame": progress("T-1", 1, 1, "a")},
                outputs=[{"event": {"received": progress("T-1", 1, 1, "a")}},
                         {"timeout": 15000}]),
           step({"now": 3, "confirm": {"task_id": "T-1", "attempt": 1, "seq": 1}},
                outputs=[{"timeout": 203}]),
           step({"writes": True}, writes=[put_task("T-1", 1)]),
           step({"forget_task": "T-1"},
                rows={"tasks": [task_row("T-1", 1, 0, True)],
                      "inbound": [{"task_id": "T-1", "attempt": 1, "through": 1}],
                      "commands": []}),
           step({"writes": True}, writes=[put_task("T-1", 1, 0, True)]),
           step({"from_rows": True},
                rows={"tasks": [task_row("T-1", 1, 0, True)],
                      "inbound": [{"task_id": "T-1", "attempt": 1, "through": 1}],
                      "commands": []}),
           step({"now": 10, "connected": True}, outputs=[{"timeout": 15010}]),
           step({"now": 11, "frame": HELLO},
                outputs=[{"event": {"hello": HELLO}}, {"timeout": 15010}]),
           # A duplicate: no event; the runner missed its acknowledgement, which is owed.
           step({"now": 12, "frame": progress("T-1", 1, 1, "a")},
                outputs=[{"timeout": 212}]),
           step({"now": 212, "tick": True},
                outputs=[{"transmit": ping(1, [{"task_id": "T-1", "attempt": 1, "seq": 1}])},
                         {"timeout": 15010}]),
           ])

    bad = cancel_frame("T-9", "x", 1)
    write("store", "invalid_rows",
          "Rows that make no hub session are refused with invalid_rows: a duplicate task, "
          "an inbound row or command of an unknown task, a command at or above its task's "
          "next_seq, a command that names another task, a command of a forgotten task, "
          "next_seq 0",
          HUB,
          [step({"from_rows": {"tasks": [task_row("T-1", 1), task_row("T-1", 2)]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 1)],
                               "inbound": [{"task_id": "T-2", "attempt": 1, "through": 1}]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2)],
                               "commands": [cmd_row("T-2", 1, cancel_frame("T-2", "x", 1))]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2)],
                               "commands": [cmd_row("T-1", 2, cancel_frame("T-1", "x", 2))]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2)],
                               "commands": [cmd_row("T-1", 1, bad)]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2, 0, True)],
                               "commands": [cmd_row("T-1", 1, C1)]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 0)]}}, error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2)],
                               "commands": [cmd_row("T-1", 1, C1)]}},
                rows={"tasks": [task_row("T-1", 2)], "inbound": [],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           ])

    t1 = task_row("T-1", 1)
    write("store", "rows_json_is_read_strictly",
          "Rows in the core's JSON form are read strictly, whatever the binding: an unknown "
          "table or column, a missing column, a wrong type, a table that is not an array "
          "are invalid_rows; a null or absent table is empty",
          HUB,
          [step({"from_rows": {"task": [t1]}}, error="invalid_rows"),
           step({"from_rows": {"tasks": [dict(t1, extra=1)]}}, error="invalid_rows"),
           step({"from_rows": {"tasks": [{k: v for k, v in t1.items() if k != "forgotten"}]}},
                error="invalid_rows"),
           step({"from_rows": {"tasks": [dict(t1, next_seq="1")]}}, error="invalid_rows"),
           step({"from_rows": {"tasks": [dict(t1, assigned_attempt=-1)]}},
                error="invalid_rows"),
           step({"from_rows": {"inbound": {}}}, error="invalid_rows"),
           step({"from_rows": {"tasks": [task_row("T-1", 2)], "inbound": None,
                               "commands": [cmd_row("T-1", 1, C1)]}},
                rows={"tasks": [task_row("T-1", 2)], "inbound": [],
                      "commands": [cmd_row("T-1", 1, C1)]}),
           ])

    write("store", "close_for_store_errors",
          "A hub closes a runner's socket for a store error with code 1012 (the runner "
          "reconnects, possibly to another hub) and the error's code as the reason: fenced, "
          "lease_expired, store_limit, store_unavailable; any other code closes as "
          "store_unavailable",
          HUB,
          [step({"close_for": "fenced"}, close=[1012, "fenced"]),
           step({"close_for": "lease_expired"}, close=[1012, "lease_expired"]),
           step({"close_for": "store_limit"}, close=[1012, "store_limit"]),
           step({"close_for": "store_unavailable"}, close=[1012, "store_unavailable"]),
           step({"close_for": "connection refused"}, close=[1012, "store_unavailable"]),
           ])


DEFAULT = {"lease_ms": 10000, "renew_every_ms": 3000, "margin_ms": 2000, "retry_ms": 500}


def lease_vectors():
    write("lease", "lease_renewal_schedule",
          "A hub's lease: the first poll asks for a renewal; a renewal that began at t holds "
          "the lease until t + lease_ms - margin_ms and schedules the next at t + "
          "renew_every_ms; renewals never overlap; a failed one is retried after retry_ms; "
          "when the held time ends the hub is told `expiring`; a later renewal says `held`",
          {},
          [step({"now": 0, "start": True}, outputs=["renew", {"timeout": None}], held=False,
                config=DEFAULT),
           step({"now": 40, "tick": True}, outputs=[{"timeout": None}], held=False),
           step({"now": 50, "renewed": 0}, outputs=[{"timeout": 3000}], held=True),
           step({"now": 3000, "tick": True}, outputs=["renew", {"timeout": 8000}], held=True),
           step({"now": 3100, "renewed": 3000}, outputs=[{"timeout": 6000}], held=True),
           step({"now": 6000, "tick": True}, outputs=["renew", {"timeout": 11000}]),
           step({"now": 6200, "renew_failed": True}, outputs=[{"timeout": 6700}], held=True),
           step({"now": 6700, "tick": True}, outputs=["renew", {"timeout": 11000}]),
           step({"now": 6800, "renew_failed": True}, outputs=[{"timeout": 7300}]),
           step({"now": 7300, "tick": True}, outputs=["renew", {"timeout": 11000}]),
           step({"now": 10999, "tick": True}, outputs=[{"timeout": 11000}], held=True),
           step({"now": 11000, "tick": True}, outputs=["expiring", {"timeout": None}],
                held=False),
           step({"now": 11500, "renewed": 11400}, outputs=["held", {"timeout": 14400}],
                held=True),
           ])

    write("lease", "lease_late_renewal_holds_nothing",
          "A renewal reported after its own held time has passed holds nothing (no `held`, "
          "no `expiring`); a report with no renewal in flight is ignored",
          {"lease_ms": 1000, "renew_every_ms": 300, "margin_ms": 200},
          [step({"now": 0, "start": True}, outputs=["renew", {"timeout": None}], held=False),
           step({"now": 900, "renewed": 0}, outputs=["renew", {"timeout": None}], held=False),
           step({"now": 950, "renewed": 900}, outputs=[{"timeout": 1200}], held=True),
           step({"now": 960, "renewed": 950}, outputs=[{"timeout": 1200}], held=True),
           step({"now": 970, "renew_failed": True}, outputs=[{"timeout": 1200}], held=True),
           ])

    write("lease", "lease_config_echo",
          "Keys override the defaults (lease_ms 10000, renew_every_ms 3000, margin_ms 2000, "
          "retry_ms 500)",
          {"lease_ms": 30000, "margin_ms": 5000},
          [step({"now": 0, "start": True}, outputs=["renew", {"timeout": None}],
                config={"lease_ms": 30000, "renew_every_ms": 3000, "margin_ms": 5000,
                        "retry_ms": 500})])

    for name, cfg, code, key, why in [
        ("lease_config_renew_too_late", {"renew_every_ms": 8000}, "out_of_range",
         "renew_every_ms", "renew_every_ms + margin_ms must stay below lease_ms"),
        ("lease_config_zero_lease", {"lease_ms": 0}, "out_of_range", "lease_ms",
         "lease_ms must be positive"),
        ("lease_config_unknown_key", {"lease_seconds": 10}, "unknown_key", "lease_seconds",
         "unknown keys are refused"),
        ("lease_config_wrong_type", {"margin_ms": "2s"}, "wrong_type", "margin_ms",
         "values are integers"),
    ]:
        write("lease", name, f"Lease config refused: {why}", cfg,
              [step({"start": True}, config_error={"code": code, "key": key})])


store_vectors()
lease_vectors()
