#!/usr/bin/env python3
"""Writes conformance/vectors/admission/*.json: the live server's admission machine
(core/src/admission/). Expectations are written out by hand here from the rules in the
module docs (not computed by the core). Run: python3 conformance/tools/gen_admission.py"""
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "vectors" / "admission"

PORT = 41000
HOST = f"127.0.0.1:{PORT}"
ORIGIN = f"http://{HOST}"
LOCAL = f"127.0.0.1:{PORT}"
PEER = "127.0.0.1:50000"


def req(id, method="GET", target="/", headers=None, peer=PEER, local=LOCAL, host=HOST, now=None):
    """A request input. `headers` come after the Host header (host=None: no Host)."""
    h = [] if host is None else [["Host", host]]
    h += [list(p) for p in (headers or [])]
    i = {"request": {"id": id, "peer": peer, "local": local, "method": method,
                     "target": target, "headers": h}}
    if now is not None:
        i["now"] = now
    return i


JSON = [["Content-Type", "application/json"]]


def post(id, target, length, extra=None, **kw):
    """A browser-like same-origin JSON POST with a Content-Length."""
    h = [["Origin", ORIGIN], ["Sec-Fetch-Site", "same-origin"]] + JSON
    h += [["Content-Length", str(length)]] + (extra or [])
    return req(id, "POST", target, h, **kw)


def api_get(id, target, extra=None, **kw):
    return req(id, "GET", target, [["Sec-Fetch-Site", "same-origin"]] + (extra or []), **kw)


def refuse(id, status, code):
    return {"refuse": {"id": id, "status": status, "code": code}}


def admit(id, route):
    return {"admit": {"id": id, "route": route}}


def read_body(id, limit=16384):
    return {"read_body": {"id": id, "limit": limit}}


def page(path="/"):
    return {"kind": "page", "path": path}


def start(n, script="happy-path"):
    return {"kind": "start_run", "run": f"run_{n}", "session": f"session_{n}", "script": script}


def events(run, cursor=0):
    return {"kind": "events", "run": run, "cursor": cursor}


def body(id, text, now=None):
    i = {"body": {"id": id, "data": text}}
    if now is not None:
        i["now"] = now
    return i


def body_end(id, now=None):
    i = {"body_end": {"id": id}}
    if now is not None:
        i["now"] = now
    return i


def step(input, **expect):
    if "outputs" not in expect and not expect:
        expect["outputs"] = []
    return {"input": input, "expect": expect}


def run(id, active=True, streams=0):
    return {"run": id, "active": active, "streams": streams}


def body_steps(id, target, text, outputs):
    """A JSON POST of `text` (its Content-Length declared): read_body, the body, then `outputs`."""
    return [
        step(post(id, target, len(text.encode())), outputs=[read_body(id)]),
        step(body(id, text), outputs=[]),
        step(body_end(id), outputs=outputs),
    ]


def start_run_steps(id, n, script="happy-path", runs=None):
    """POST /api/runs with {"script": script}: read_body, the body, then the admission."""
    text = json.dumps({"script": script}, separators=(",", ":"))
    out = [step(post(id, "/api/runs", len(text)), outputs=[read_body(id)]),
           step(body(id, text), outputs=[])]
    last = {"outputs": [admit(id, start(n, script))]}
    if runs is not None:
        last["runs"] = runs
    out.append(step(body_end(id), **last))
    return out


V = {}

V["control_page_and_api_admitted"] = (
    "Controls: a typed navigation to the page (Sec-Fetch-Site none), the page's same-origin assets, a HEAD, "
    "a request with no Fetch Metadata at all (a local tool) and the scripts list are admitted",
    {"pages": ["/", "/app.js"]},
    [
        step(req(1, "GET", "/", [["Sec-Fetch-Site", "none"], ["Sec-Fetch-Mode", "navigate"]]),
             outputs=[admit(1, page("/"))]),
        step(req(2, "GET", "/app.js", [["Sec-Fetch-Site", "same-origin"]]), outputs=[admit(2, page("/app.js"))]),
        step(req(3, "HEAD", "/"), outputs=[admit(3, page("/"))]),
        step(req(4, "GET", "/", host=f"localhost:{PORT}"), outputs=[admit(4, page("/"))]),
        step(req(5, "GET", "/?x=1", [["Origin", ORIGIN]]), outputs=[admit(5, page("/"))]),
        step(api_get(6, "/api/scripts", [["Origin", ORIGIN]]), outputs=[{"admit": {"id": 6, "route": {"kind": "scripts"}}}],
             runs=[], pending=0),
    ],
)

V["loopback_both_ends"] = (
    "Rule 1: both socket ends must be loopback (127.0.0.0/8, ::1, IPv4-mapped 127.x); anything else is 403 "
    "not_loopback before any other check, whatever the path",
    {},
    [
        step(req(1, peer="192.168.1.7:50000"), outputs=[refuse(1, 403, "not_loopback")]),
        step(req(2, local="10.0.0.2:41000"), outputs=[refuse(2, 403, "not_loopback")]),
        step(req(3, local="0.0.0.0:41000"), outputs=[refuse(3, 403, "not_loopback")]),
        step(req(4, peer="[2001:db8::1]:50000", target="/api/nope", host="attacker.test"),
             outputs=[refuse(4, 403, "not_loopback")]),
        step(req(5, peer="not an address"), outputs=[refuse(5, 403, "not_loopback")]),
        step(req(6, peer="127.0.0.2:1"), outputs=[admit(6, page())]),
        step(req(7, peer="[::1]:1", local="[::1]:41000"), outputs=[admit(7, page())]),
        step(req(8, peer="[::ffff:127.0.0.1]:1"), outputs=[admit(8, page())]),
    ],
)

V["host_exact_stops_dns_rebinding"] = (
    "Rule 2: exactly one Host, equal to 127.0.0.1:PORT or localhost:PORT (PORT the local socket's); a rebound name "
    "(attacker.test:PORT), another port, a missing port, an IPv6 literal, a missing or repeated Host are 403 "
    "bad_host — before route lookup, so a hostile request to any path gets the same answer",
    {},
    [
        step(req(1, host=f"attacker.test:{PORT}"), outputs=[refuse(1, 403, "bad_host")]),
        step(post(2, "/api/runs", 20, host=f"attacker.test:{PORT}"), outputs=[refuse(2, 403, "bad_host")]),
        step(req(3, target="/api/runs/run_1/events", host=f"attacker.test:{PORT}",
                 headers=[["Origin", f"http://attacker.test:{PORT}"]]), outputs=[refuse(3, 403, "bad_host")]),
        step(req(4, host="127.0.0.1:41001"), outputs=[refuse(4, 403, "bad_host")]),
        step(req(5, host="127.0.0.1"), outputs=[refuse(5, 403, "bad_host")]),
        step(req(6, host=f"127.0.0.1:0{PORT}"), outputs=[refuse(6, 403, "bad_host")]),
        step(req(7, host=f"[::1]:{PORT}"), outputs=[refuse(7, 403, "bad_host")]),
        step(req(8, host=f"127.0.0.2:{PORT}"), outputs=[refuse(8, 403, "bad_host")]),
        step(req(9, host=None), outputs=[refuse(9, 403, "bad_host")]),
        step(req(10, headers=[["host", HOST]]), outputs=[refuse(10, 403, "bad_host")]),
        step(req(11, host=f"localhost.:{PORT}"), outputs=[refuse(11, 403, "bad_host")]),
        step(req(12, target="/nope", host=f"attacker.test:{PORT}"), outputs=[refuse(12, 403, "bad_host")]),
        step(req(13, host=f"LOCALHOST:{PORT}"), outputs=[admit(13, page())]),
        step(req(14, host=HOST), outputs=[admit(14, page())], runs=[]),
    ],
)

V["host_port_80_may_omit_the_port"] = (
    "Rule 2 on port 80: a browser omits the default port, so 127.0.0.1 and localhost alone are this server's "
    "authority there (and http://127.0.0.1 its origin); on any other port the port is required",
    {},
    [
        step(req(1, local="127.0.0.1:80", host="127.0.0.1", headers=[["Origin", "http://127.0.0.1"]]),
             outputs=[admit(1, page())]),
        step(req(2, local="127.0.0.1:80", host="localhost:80"), outputs=[admit(2, page())]),
        step(req(3, local="127.0.0.1:80", host="127.0.0.1", headers=[["Origin", "http://127.0.0.1:80"]]),
             outputs=[refuse(3, 403, "origin_mismatch")]),
    ],
)

V["origin_exact_same_origin"] = (
    "Rule 3: an Origin, when present, must equal http:// + Host exactly. Another loopback port is same-site but "
    "not same-origin (refused), so are null, https, the other loopback name and a repeated Origin: 403 "
    "origin_mismatch, and no run is registered",
    {},
    [
        step(post(1, "/api/runs", 23, extra=[["Origin", "http://127.0.0.1:41001"]]), outputs=[refuse(1, 403, "origin_mismatch")]),
        step(req(2, "POST", "/api/runs", [["Origin", "http://127.0.0.1:41001"], ["Content-Type", "application/json"],
                                          ["Content-Length", "23"]]), outputs=[refuse(2, 403, "origin_mismatch")]),
        step(api_get(3, "/api/scripts", [["Origin", "null"]]), outputs=[refuse(3, 403, "origin_mismatch")]),
        step(api_get(4, "/api/scripts", [["Origin", f"https://{HOST}"]]), outputs=[refuse(4, 403, "origin_mismatch")]),
        step(api_get(5, "/api/scripts", [["Origin", f"http://localhost:{PORT}"]]),
             outputs=[refuse(5, 403, "origin_mismatch")]),
        step(api_get(6, "/api/scripts", [["Origin", ORIGIN], ["origin", ORIGIN]]),
             outputs=[refuse(6, 403, "origin_mismatch")]),
        step(api_get(7, "/api/scripts", [["Origin", ORIGIN + "/"]]), outputs=[refuse(7, 403, "origin_mismatch")]),
        step(req(8, "GET", "/", [["Origin", "http://127.0.0.1:41001"], ["Sec-Fetch-Site", "same-site"]]),
             outputs=[refuse(8, 403, "origin_mismatch")], runs=[]),
        step(api_get(9, "/api/scripts", [["Origin", f"http://localhost:{PORT}"]], host=f"localhost:{PORT}"),
             outputs=[{"admit": {"id": 9, "route": {"kind": "scripts"}}}]),
    ] + start_run_steps(10, 1, runs=[run("run_1")]),
)

V["fetch_site_same_origin_only"] = (
    "Rule 4: Sec-Fetch-Site, when present, must be same-origin; none (a typed navigation) is allowed only for a "
    "GET/HEAD of a page path; same-site (another loopback port), cross-site, a repeated header: 403 fetch_site_refused",
    {"pages": ["/", "/app.js"]},
    [
        step(api_get(1, "/api/scripts", [["Sec-Fetch-Site", "same-site"]]), outputs=[refuse(1, 403, "fetch_site_refused")]),
        step(req(2, "GET", "/api/scripts", [["Sec-Fetch-Site", "cross-site"]]), outputs=[refuse(2, 403, "fetch_site_refused")]),
        step(req(3, "GET", "/api/scripts", [["Sec-Fetch-Site", "none"]]), outputs=[refuse(3, 403, "fetch_site_refused")]),
        step(req(4, "GET", "/", [["Sec-Fetch-Site", "same-site"]]), outputs=[refuse(4, 403, "fetch_site_refused")]),
        step(req(5, "GET", "/app.js", [["Sec-Fetch-Site", "cross-site"]]), outputs=[refuse(5, 403, "fetch_site_refused")]),
        step(req(6, "GET", "/", [["Sec-Fetch-Site", "none"], ["Sec-Fetch-Site", "none"]]),
             outputs=[refuse(6, 403, "fetch_site_refused")]),
        step(req(7, "POST", "/", [["Sec-Fetch-Site", "none"]]), outputs=[refuse(7, 403, "fetch_site_refused")]),
        step(req(8, "GET", "/nope", [["Sec-Fetch-Site", "same-site"]]), outputs=[refuse(8, 403, "fetch_site_refused")]),
        step(req(9, "GET", "/app.js", [["Sec-Fetch-Site", "none"]]), outputs=[admit(9, page("/app.js"))]),
        step(req(10, "HEAD", "/", [["Sec-Fetch-Site", "none"]]), outputs=[admit(10, page("/"))]),
        step(api_get(11, "/api/scripts"), outputs=[{"admit": {"id": 11, "route": {"kind": "scripts"}}}]),
    ],
)

V["websocket_upgrade_origin_check"] = (
    "Rule 5: an upgrade request (a WebSocket) passes the same Host and Origin checks and must carry an Origin; "
    "with the exact Origin it reaches the route stage, where no route upgrades (400 upgrade_not_supported)",
    {},
    [
        step(req(1, "GET", "/api/runs/run_1/events",
                 [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Origin", "http://127.0.0.1:41001"],
                  ["Sec-WebSocket-Version", "13"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="]]),
             outputs=[refuse(1, 403, "origin_mismatch")]),
        step(req(2, "GET", "/ws", [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Origin", f"http://attacker.test:{PORT}"]],
                 host=f"attacker.test:{PORT}"), outputs=[refuse(2, 403, "bad_host")]),
        step(req(3, "GET", "/ws", [["Upgrade", "websocket"], ["Connection", "Upgrade"]]),
             outputs=[refuse(3, 403, "origin_required")]),
        step(req(4, "GET", "/ws", [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Origin", "null"]]),
             outputs=[refuse(4, 403, "origin_mismatch")]),
        step(req(5, "GET", "/", [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Origin", ORIGIN],
                                 ["Sec-Fetch-Site", "same-site"]]),
             outputs=[refuse(5, 403, "fetch_site_refused")]),
        step(req(6, "GET", "/ws", [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Origin", ORIGIN]]),
             outputs=[refuse(6, 400, "upgrade_not_supported")]),
    ],
)

V["routes_targets_and_methods"] = (
    "Rules 6–7: the target must be origin-form (400 bad_target); unknown paths are 404 not_found (pages only from "
    "the configured list); a known path with another method is 405 method_not_allowed",
    {"pages": ["/", "/app.js"]},
    [
        step(req(1, "OPTIONS", "*"), outputs=[refuse(1, 400, "bad_target")]),
        step(req(2, "GET", f"http://{HOST}/"), outputs=[refuse(2, 400, "bad_target")]),
        step(req(3, "GET", "/index.html"), outputs=[refuse(3, 404, "not_found")]),
        step(req(4, "GET", "/app.js/"), outputs=[refuse(4, 404, "not_found")]),
        step(api_get(5, "/api/nope"), outputs=[refuse(5, 404, "not_found")]),
        step(api_get(6, "/api"), outputs=[refuse(6, 404, "not_found")]),
        step(api_get(7, "/api/runs/run_1"), outputs=[refuse(7, 404, "not_found")]),
        step(api_get(8, "/api/runs//events"), outputs=[refuse(8, 404, "not_found")]),
        step(api_get(9, "/api/runs/run_1/events/x"), outputs=[refuse(9, 404, "not_found")]),
        step(req(10, "DELETE", "/"), outputs=[refuse(10, 405, "method_not_allowed")]),
        step(req(11, "OPTIONS", "/api/runs", [["Origin", ORIGIN], ["Access-Control-Request-Method", "POST"]]),
             outputs=[refuse(11, 405, "method_not_allowed")]),
        step(api_get(12, "/api/runs"), outputs=[refuse(12, 405, "method_not_allowed")]),
        step(req(13, "POST", "/api/scripts", [["Origin", ORIGIN]] + JSON), outputs=[refuse(13, 405, "method_not_allowed")]),
        step(req(14, "PUT", "/api/runs/run_1/actions", [["Origin", ORIGIN]] + JSON),
             outputs=[refuse(14, 405, "method_not_allowed")]),
        step(req(15, "POST", "/api/runs/run_1/events", [["Origin", ORIGIN]] + JSON),
             outputs=[refuse(15, 405, "method_not_allowed")]),
        step(req(16, "get", "/"), outputs=[refuse(16, 405, "method_not_allowed")]),
        step(req(17, "GET", "/app.js"), outputs=[admit(17, page("/app.js"))]),
    ],
)

V["body_framing"] = (
    "Rule 8: a GET/HEAD takes no body (400 body_not_allowed); Content-Length must be one run of digits and never "
    "meet Transfer-Encoding, which may only be chunked (400 bad_framing); Content-Length 0 is no body",
    {},
    [
        step(req(1, "GET", "/", [["Content-Length", "5"]]), outputs=[refuse(1, 400, "body_not_allowed")]),
        step(api_get(2, "/api/scripts", [["Transfer-Encoding", "chunked"]]), outputs=[refuse(2, 400, "body_not_allowed")]),
        step(req(3, "GET", "/", [["Content-Length", "0"]]), outputs=[admit(3, page())]),
        step(req(4, "POST", "/api/runs", JSON + [["Content-Length", "10"], ["Transfer-Encoding", "chunked"]]),
             outputs=[refuse(4, 400, "bad_framing")]),
        step(req(5, "POST", "/api/runs", JSON + [["Content-Length", "1x"]]), outputs=[refuse(5, 400, "bad_framing")]),
        step(req(6, "POST", "/api/runs", JSON + [["Content-Length", "-1"]]), outputs=[refuse(6, 400, "bad_framing")]),
        step(req(7, "POST", "/api/runs", JSON + [["Content-Length", "4"], ["Content-Length", "4"]]),
             outputs=[refuse(7, 400, "bad_framing")]),
        step(req(8, "POST", "/api/runs", JSON + [["Transfer-Encoding", "gzip, chunked"]]),
             outputs=[refuse(8, 400, "bad_framing")]),
        step(req(9, "POST", "/api/runs", JSON + [["Transfer-Encoding", "identity"]]),
             outputs=[refuse(9, 400, "bad_framing")]),
        step(req(10, "GET", "/", [["Content-Length", "x"]]), outputs=[refuse(10, 400, "bad_framing")]),
    ],
)

V["actions_json_only"] = (
    "Rule 9: a POST must be Content-Type application/json (parameters allowed, any case): text/plain (a form or "
    "simple request), form encodings, a missing or repeated Content-Type are 415 unsupported_media_type",
    {},
    [
        step(req(1, "POST", "/api/runs", [["Origin", ORIGIN], ["Content-Type", "text/plain"], ["Content-Length", "23"]]),
             outputs=[refuse(1, 415, "unsupported_media_type")]),
        step(req(2, "POST", "/api/runs", [["Content-Type", "application/x-www-form-urlencoded"], ["Content-Length", "9"]]),
             outputs=[refuse(2, 415, "unsupported_media_type")]),
        step(req(3, "POST", "/api/runs", [["Content-Type", "multipart/form-data; boundary=x"], ["Content-Length", "9"]]),
             outputs=[refuse(3, 415, "unsupported_media_type")]),
        step(req(4, "POST", "/api/runs", [["Content-Length", "9"]]), outputs=[refuse(4, 415, "unsupported_media_type")]),
        step(req(5, "POST", "/api/runs", JSON + JSON + [["Content-Length", "9"]]),
             outputs=[refuse(5, 415, "unsupported_media_type")]),
        step(req(6, "POST", "/api/runs", [["Content-Type", "application/jsonx"], ["Content-Length", "9"]]),
             outputs=[refuse(6, 415, "unsupported_media_type")]),
        step(req(7, "POST", "/api/runs", [["Content-Type", "Application/JSON; charset=utf-8"], ["Content-Length", "23"]]),
             outputs=[read_body(7)], pending=1),
    ],
)

big = " " * (16384 - len('{"script":"happy-path"}')) + '{"script":"happy-path"}'
V["body_bound_declared_and_chunked"] = (
    "Rules 10 and 13: a declared Content-Length above 16 KiB is 413 body_too_large at once; a chunked body is "
    "counted while it streams and refused as soon as it passes 16 KiB (the rest is not read: more bytes for it are "
    "unknown_request); exactly 16 KiB passes",
    {},
    [
        step(post(1, "/api/runs", 16385), outputs=[refuse(1, 413, "body_too_large")]),
        step(post(2, "/api/runs", 99999999999999999999), outputs=[refuse(2, 413, "body_too_large")]),
        step(req(3, "POST", "/api/runs", [["Origin", ORIGIN]] + JSON + [["Transfer-Encoding", "chunked"]]),
             outputs=[read_body(3)], pending=1),
        step(body(3, "x" * 8192), outputs=[]),
        step(body(3, "x" * 8192), outputs=[], pending=1),
        step(body(3, "x"), outputs=[refuse(3, 413, "body_too_large")], pending=0),
        step(body(3, "x"), error="unknown_request"),
        step(req(4, "POST", "/api/runs", JSON + [["Transfer-Encoding", "chunked"]]), outputs=[read_body(4)]),
        step(body(4, big[:10000]), outputs=[]),
        step(body(4, big[10000:]), outputs=[]),
        step(body_end(4), outputs=[admit(4, start(1))], runs=[run("run_1")]),
        step(post(5, "/api/runs", 16384), outputs=[read_body(5)]),
    ],
)

V["start_run_and_stream"] = (
    "Controls: a start admits run_1/session_1 after its body; its events stream is admitted from cursor 0, from "
    "Last-Event-ID (which wins) or ?cursor=N; a malformed cursor is 400 invalid_cursor and an unknown run 404 unknown_run",
    {"scripts": ["happy-path", "permission-input"]},
    start_run_steps(1, 1, "permission-input", runs=[run("run_1")]) + [
        step(api_get(2, "/api/runs/run_1/events"), outputs=[admit(2, events("run_1"))]),
        step(api_get(3, "/api/runs/run_1/events", [["Last-Event-ID", "5"]]), outputs=[admit(3, events("run_1", 5))]),
        step(api_get(4, "/api/runs/run_1/events?cursor=3"), outputs=[admit(4, events("run_1", 3))]),
        step(api_get(5, "/api/runs/run_1/events?cursor=3", [["Last-Event-ID", "7"]]), outputs=[admit(5, events("run_1", 7))]),
        step(api_get(6, "/api/runs/run_1/events?cursor=-1"), outputs=[refuse(6, 400, "invalid_cursor")]),
        step(api_get(7, "/api/runs/run_1/events", [["Last-Event-ID", "x"]]), outputs=[refuse(7, 400, "invalid_cursor")]),
        step(api_get(8, "/api/runs/run_1/events?cursor=1&cursor=2"), outputs=[refuse(8, 400, "invalid_cursor")]),
        step(api_get(9, "/api/runs/run_9/events"), outputs=[refuse(9, 404, "unknown_run")],
             runs=[run("run_1", streams=4)]),
    ] + start_run_steps(10, 2, "happy-path", runs=[run("run_1", streams=4), run("run_2")]),
)

V["start_body_shape"] = (
    "Rule 14 for a start: the body must be a JSON object (400 invalid_json: not JSON, an array, a repeated key, "
    "invalid UTF-8, empty) holding only a script string the server offers (400 unknown_script); nothing is registered",
    {"scripts": ["happy-path"]},
    body_steps(1, "/api/runs", '{"script":"unknown"}', [refuse(1, 400, "unknown_script")])
    + body_steps(2, "/api/runs", '{"script":1}', [refuse(2, 400, "unknown_script")])
    + body_steps(3, "/api/runs", '{"script":"happy-path","x":1}', [refuse(3, 400, "unknown_script")])
    + body_steps(4, "/api/runs", '{}', [refuse(4, 400, "unknown_script")])
    + body_steps(5, "/api/runs", '[]', [refuse(5, 400, "invalid_json")])
    + body_steps(6, "/api/runs", '{"scr', [refuse(6, 400, "invalid_json")])
    + body_steps(7, "/api/runs", '{"script":"happy-path","script":"error"}', [refuse(7, 400, "invalid_json")])
    + [
        step(post(8, "/api/runs", 3), outputs=[read_body(8)]),
        step({"body": {"id": 8, "data_hex": "7bff7d"}}, outputs=[]),
        step(body_end(8), outputs=[refuse(8, 400, "invalid_json")]),
        step(req(9, "POST", "/api/runs", JSON), outputs=[refuse(9, 400, "invalid_json")], runs=[], pending=0),
        step(req(10, "POST", "/api/runs", JSON + [["Content-Length", "0"]]), outputs=[refuse(10, 400, "invalid_json")]),
    ],
)

V["start_any_plain_script_name"] = (
    "Rule 14 without a script list: any name of letters, digits, '.', '_', '-' (1..=160) is offered to the host; "
    "a path, '..' or an empty name is unknown_script",
    {},
    body_steps(1, "/api/runs", '{"script":"../../etc/passwd"}', [refuse(1, 400, "unknown_script")])
    + body_steps(2, "/api/runs", '{"script":".."}', [refuse(2, 400, "unknown_script")])
    + body_steps(3, "/api/runs", '{"script":""}', [refuse(3, 400, "unknown_script")])
    + body_steps(4, "/api/runs", '{"script":"%s"}' % ("a" * 161), [refuse(4, 400, "unknown_script")])
    + start_run_steps(5, 1, "my_script-2.v1", runs=[run("run_1")]),
)


def action_steps(id, run_id, payload, outputs):
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return body_steps(id, f"/api/runs/{run_id}/actions", text, outputs)


def action(id, run_id, command, payload):
    return admit(id, {"kind": "action", "run": run_id, "command": command, "payload": payload})


V["actions_become_commands"] = (
    "Rule 14 for an action: each of the four actions becomes its controller command type and payload; an unknown "
    "type, a missing or empty field, an extra key is 400 invalid_action; an unknown run 404 unknown_run; once the "
    "run ended 409 run_finished",
    {},
    start_run_steps(1, 1, runs=[run("run_1")])
    + action_steps(2, "run_1", {"type": "resolve_permission", "requestId": "req_1", "choice": "allow"},
                   [action(2, "run_1", "request.resolve", {"requestId": "req_1", "response": {"choice": "allow"}})])
    + action_steps(3, "run_1", {"type": "answer_input", "requestId": "req_2", "text": "é ✓"},
                   [action(3, "run_1", "request.resolve", {"requestId": "req_2", "response": {"text": "é ✓"}})])
    + action_steps(4, "run_1", {"type": "answer_input", "requestId": "req_2", "text": ""},
                   [action(4, "run_1", "request.resolve", {"requestId": "req_2", "response": {"text": ""}})])
    + action_steps(5, "run_1", {"type": "interrupt", "turnId": "turn_1"},
                   [action(5, "run_1", "turn.interrupt", {"turnId": "turn_1", "reason": "operator"})])
    + action_steps(6, "run_1", {"type": "interrupt"},
                   [action(6, "run_1", "turn.interrupt", {"reason": "operator"})])
    + action_steps(7, "run_1", {"type": "cancel"},
                   [action(7, "run_1", "run.cancel", {"reason": "operator"})])
    + action_steps(8, "run_1", {"type": "run.cancel"}, [refuse(8, 400, "invalid_action")])
    + action_steps(9, "run_1", {"type": "resolve_permission", "requestId": "req_1"}, [refuse(9, 400, "invalid_action")])
    + action_steps(10, "run_1", {"type": "resolve_permission", "requestId": "", "choice": "allow"},
                   [refuse(10, 400, "invalid_action")])
    + action_steps(11, "run_1", {"type": "cancel", "reason": "mine"}, [refuse(11, 400, "invalid_action")])
    + action_steps(12, "run_1", {"type": "interrupt", "turnId": 7}, [refuse(12, 400, "invalid_action")])
    + action_steps(13, "run_1", {"type": "answer_input", "requestId": "r", "text": None}, [refuse(13, 400, "invalid_action")])
    + action_steps(14, "run_1", {"type": "resolve_permission", "requestId": "r" * 161, "choice": "allow"},
                   [refuse(14, 400, "invalid_action")])
    + [step(post(15, "/api/runs/run_7/actions", 17), outputs=[refuse(15, 404, "unknown_run")])]
    + [step({"run_ended": {"run": "run_1"}}, outputs=[], runs=[run("run_1", active=False)])]
    + [step(post(16, "/api/runs/run_1/actions", 17), outputs=[refuse(16, 409, "run_finished")])]
    + [step(api_get(17, "/api/runs/run_1/events"), outputs=[admit(17, events("run_1"))])],
)

V["action_for_a_run_that_ends_meanwhile"] = (
    "Rules 11 and 14: an action whose head passed while its run was active is refused 409 run_finished when the "
    "run ended before its body completed; the body is judged first (a malformed one is invalid_action)",
    {},
    start_run_steps(1, 1)
    + [
        step(post(2, "/api/runs/run_1/actions", 17), outputs=[read_body(2)]),
        step(post(3, "/api/runs/run_1/actions", 4), outputs=[read_body(3)]),
        step({"run_ended": {"run": "run_1"}}, outputs=[], pending=2),
        step(body(2, '{"type":"cancel"}'), outputs=[]),
        step(body_end(2), outputs=[refuse(2, 409, "run_finished")]),
        step(body(3, '{"x"'), outputs=[]),
        step(body_end(3), outputs=[refuse(3, 400, "invalid_json")]),
        step({"run_ended": {"run": "run_1"}}, outputs=[], runs=[run("run_1", active=False)]),
    ],
)

V["active_run_cap"] = (
    "Rule 12: at most max_active_runs active runs: a start beyond it is 429 too_many_active_runs at its head, and "
    "again when its body completes if another start took the last place meanwhile; a run that ends frees its place",
    {"max_active_runs": 2},
    start_run_steps(1, 1) + start_run_steps(2, 2)
    + [
        step(post(3, "/api/runs", 23), outputs=[refuse(3, 429, "too_many_active_runs")],
             runs=[run("run_1"), run("run_2")]),
        step({"run_ended": {"run": "run_1"}}, outputs=[], runs=[run("run_1", active=False), run("run_2")]),
        step(post(4, "/api/runs", 23), outputs=[read_body(4)]),
        step(post(5, "/api/runs", 23), outputs=[read_body(5)]),
        step(body(4, '{"script":"happy-path"}'), outputs=[]),
        step(body(5, '{"script":"happy-path"}'), outputs=[]),
        step(body_end(5), outputs=[admit(5, start(3))]),
        step(body_end(4), outputs=[refuse(4, 429, "too_many_active_runs")],
             runs=[run("run_1", active=False), run("run_2"), run("run_3")]),
        step({"run_ended": {"run": "run_3"}}, outputs=[]),
    ] + start_run_steps(6, 4, runs=[run("run_1", active=False), run("run_2"), run("run_3", active=False), run("run_4")]),
)

V["retained_runs_evict_oldest_completed"] = (
    "Rule 12: at most max_retained_runs runs are kept; a new start evicts the oldest completed run (never an "
    "active one), before its admission; the evicted run's history is gone (404 unknown_run)",
    {"max_active_runs": 2, "max_retained_runs": 3},
    start_run_steps(1, 1) + start_run_steps(2, 2)
    + [step({"run_ended": {"run": "run_2"}}, outputs=[])]
    + start_run_steps(3, 3, runs=[run("run_1"), run("run_2", active=False), run("run_3")])
    + [step({"run_ended": {"run": "run_3"}}, outputs=[])]
    + [
        step(post(4, "/api/runs", 23), outputs=[read_body(4)]),
        step(body(4, '{"script":"happy-path"}'), outputs=[]),
        step(body_end(4), outputs=[{"evict": {"run": "run_2"}}, admit(4, start(4))],
             runs=[run("run_1"), run("run_3", active=False), run("run_4")]),
        step(api_get(5, "/api/runs/run_2/events"), outputs=[refuse(5, 404, "unknown_run")]),
        step({"run_ended": {"run": "run_2"}}, error="run_not_kept"),
        step({"run_ended": {"run": "run_1"}}, outputs=[]),
        step(post(6, "/api/runs", 23), outputs=[read_body(6)]),
        step(body(6, '{"script":"happy-path"}'), outputs=[]),
        step(body_end(6), outputs=[{"evict": {"run": "run_1"}}, admit(6, start(5))],
             runs=[run("run_3", active=False), run("run_4"), run("run_5")]),
    ],
)

V["stream_client_cap"] = (
    "Rule 12: at most max_stream_clients streams per run (429 too_many_stream_clients); a closed stream frees its "
    "place; another run has its own count; an unknown stream id closing is ignored",
    {"max_stream_clients": 2},
    start_run_steps(1, 1) + start_run_steps(2, 2)
    + [
        step(api_get(3, "/api/runs/run_1/events"), outputs=[admit(3, events("run_1"))]),
        step(api_get(4, "/api/runs/run_1/events"), outputs=[admit(4, events("run_1"))]),
        step(api_get(5, "/api/runs/run_1/events"), outputs=[refuse(5, 429, "too_many_stream_clients")],
             runs=[run("run_1", streams=2), run("run_2")]),
        step(api_get(6, "/api/runs/run_2/events"), outputs=[admit(6, events("run_2"))]),
        step(api_get(4, "/api/scripts"), error="duplicate_request"),
        step({"stream_closed": {"id": 3}}, outputs=[], runs=[run("run_1", streams=1), run("run_2", streams=1)]),
        step({"stream_closed": {"id": 3}}, outputs=[], runs=[run("run_1", streams=1), run("run_2", streams=1)]),
        step({"stream_closed": {"id": 99}}, outputs=[]),
        step(api_get(7, "/api/runs/run_1/events"), outputs=[admit(7, events("run_1"))],
             runs=[run("run_1", streams=2), run("run_2", streams=1)]),
        step({"run_ended": {"run": "run_1"}}, outputs=[]),
        step(api_get(8, "/api/runs/run_1/events"), outputs=[refuse(8, 429, "too_many_stream_clients")]),
    ],
)

V["evicted_run_forgets_its_streams"] = (
    "An evicted run's stream clients are forgotten with it (the host ends those streams); their later close is "
    "ignored",
    {"max_active_runs": 1, "max_retained_runs": 1},
    start_run_steps(1, 1)
    + [
        step(api_get(2, "/api/runs/run_1/events"), outputs=[admit(2, events("run_1"))]),
        step({"run_ended": {"run": "run_1"}}, outputs=[], runs=[run("run_1", active=False, streams=1)]),
    ]
    + [
        step(post(3, "/api/runs", 23), outputs=[read_body(3)]),
        step(body(3, '{"script":"happy-path"}'), outputs=[]),
        step(body_end(3), outputs=[{"evict": {"run": "run_1"}}, admit(3, start(2))], runs=[run("run_2")]),
        step({"stream_closed": {"id": 2}}, outputs=[], runs=[run("run_2")]),
        step(api_get(2, "/api/runs/run_2/events"), outputs=[admit(2, events("run_2"))],
             runs=[run("run_2", streams=1)]),
    ],
)

V["pending_bodies_cap_and_timeout"] = (
    "Rules 12–13: at most max_pending_bodies bodies are read at once (503 too_many_pending_bodies); a body not "
    "complete body_timeout_ms after its head is 408 body_timeout at the Timeout input; an aborted body is forgotten",
    {"max_pending_bodies": 2, "body_timeout_ms": 100},
    [
        step(post(1, "/api/runs", 23, now=1000), outputs=[read_body(1)], timeout=1100, pending=1),
        step(post(2, "/api/runs", 23, now=1050), outputs=[read_body(2)], timeout=1100, pending=2),
        step(post(3, "/api/runs", 23, now=1060), outputs=[refuse(3, 503, "too_many_pending_bodies")]),
        step({"timeout": True, "now": 1099}, outputs=[], pending=2),
        step({"timeout": True, "now": 1100}, outputs=[refuse(1, 408, "body_timeout")], timeout=1150, pending=1),
        step({"aborted": {"id": 2}}, outputs=[], timeout=None, pending=0),
        step({"aborted": {"id": 2}}, error="unknown_request"),
        step(body_end(1), error="unknown_request"),
        step(post(4, "/api/runs", 23, now=2000), outputs=[read_body(4)]),
        step(post(5, "/api/runs", 23, now=2001), outputs=[read_body(5)]),
        step({"timeout": True, "now": 2500}, outputs=[refuse(4, 408, "body_timeout"), refuse(5, 408, "body_timeout")],
             timeout=None, runs=[]),
    ],
)

V["misuse_errors"] = (
    "Local misuse is an error with a code and changes nothing: a request id whose body is being read "
    "(duplicate_request), body bytes for no pending body (unknown_request), the end of a run never started "
    "(run_not_kept), an input form that is none of the documented ones (invalid_input)",
    {},
    [
        step(post(1, "/api/runs", 23), outputs=[read_body(1)]),
        step(post(1, "/api/runs", 23), error="duplicate_request", pending=1),
        step(body(2, "x"), error="unknown_request"),
        step({"body_end": {"id": 2}}, error="unknown_request"),
        step({"run_ended": {"run": "run_1"}}, error="run_not_kept", runs=[]),
        step({"bogus": {}}, error="invalid_input"),
        step({"request": {"id": 3}}, error="invalid_input"),
        step({"body": {"id": 1, "data_hex": "7"}}, error="invalid_input"),
        step({"body": {"id": 1, "data": "{\"script\":\"happy-path\"}"}}, outputs=[], pending=1),
        step(body_end(1), outputs=[admit(1, start(1))], pending=0),
        step(req(1, "GET", "/"), outputs=[admit(1, page())]),
    ],
)

V["config_keys"] = (
    "The config reader: defaults, every key, unknown keys, wrong types, out-of-range numbers "
    "(max_retained_runs below max_active_runs; zero sizes), pages outside /api/ starting with /",
    {},
    [
        step({"parse_config": {}}, config={
            "max_body_bytes": 16384, "max_active_runs": 4, "max_retained_runs": 16, "max_stream_clients": 8,
            "max_pending_bodies": 64, "body_timeout_ms": 10000, "scripts": [], "pages": ["/"]}),
        step({"parse_config": {"max_body_bytes": 10, "max_active_runs": 1, "max_retained_runs": 1,
                               "max_stream_clients": 1, "max_pending_bodies": 1, "body_timeout_ms": 0,
                               "scripts": ["a"], "pages": ["/", "/x.js"]}},
             config={"max_body_bytes": 10, "max_active_runs": 1, "max_retained_runs": 1, "max_stream_clients": 1,
                     "max_pending_bodies": 1, "body_timeout_ms": 0, "scripts": ["a"], "pages": ["/", "/x.js"]}),
        step({"parse_config": {"max_retained_runs": 3}}, config_error={"code": "out_of_range", "key": "max_retained_runs"}),
        step({"parse_config": {"max_active_runs": 0}}, config_error={"code": "out_of_range", "key": "max_active_runs"}),
        step({"parse_config": {"max_body_bytes": -1}}, config_error={"code": "out_of_range", "key": "max_body_bytes"}),
        step({"parse_config": {"max_stream_clients": "8"}}, config_error={"code": "wrong_type", "key": "max_stream_clients"}),
        step({"parse_config": {"scripts": "happy-path"}}, config_error={"code": "wrong_type", "key": "scripts"}),
        step({"parse_config": {"pages": ["/api/x"]}}, config_error={"code": "wrong_type", "key": "pages"}),
        step({"parse_config": {"pages": ["index.html"]}}, config_error={"code": "wrong_type", "key": "pages"}),
        step({"parse_config": {"port": 1}}, config_error={"code": "unknown_key", "key": "port"}),
        step({"parse_config": []}, config_error={"code": "not_an_object", "key": ""}),
    ],
)

MESSAGES = {
    "not_loopback": "This server only talks to loopback sockets.",
    "bad_host": "The Host header must be this server's loopback address and port.",
    "origin_mismatch": "The request's Origin is not this server's origin.",
    "fetch_site_refused": "Only same-origin requests reach this server.",
    "origin_required": "An upgrade request must carry an Origin header.",
    "upgrade_not_supported": "This server upgrades no connection.",
    "bad_target": "The request target must be a path.",
    "not_found": "Nothing is served at this path.",
    "method_not_allowed": "This path does not take this method.",
    "bad_framing": "The request body's framing is malformed.",
    "body_not_allowed": "This request takes no body.",
    "unsupported_media_type": "Actions must be sent as application/json.",
    "body_too_large": "The request body is too large.",
    "body_timeout": "The request body did not arrive in time.",
    "unknown_run": "This server keeps no run of that id.",
    "run_finished": "This request expired because the local run already finished. Start a new run.",
    "invalid_cursor": "The stream cursor must be a non-negative integer.",
    "too_many_active_runs": "Too many runs are active; wait for one to finish.",
    "too_many_stream_clients": "Too many clients are streaming this run.",
    "too_many_pending_bodies": "Too many requests are being received; retry.",
    "invalid_json": "The request body must be a JSON object.",
    "invalid_action": "The request body is not a valid action.",
    "unknown_script": "This server offers no script of that name.",
}

V["error_bodies_and_response_headers"] = (
    "Every refusal's JSON body, byte for byte ({\"error\":{\"code\",\"message\"}}; null for an unknown code), and "
    "the headers every response carries: no CORS header, nosniff, no-referrer, a CSP without inline script, "
    "cross-origin isolation",
    {},
    [step({"error_body": code}, value=json.dumps({"error": {"code": code, "message": msg}}, ensure_ascii=False,
                                                 separators=(",", ":")))
     for code, msg in MESSAGES.items()]
    + [step({"error_body": "nope"}, value=None),
       step({"response_headers": True}, value=[
           ["X-Content-Type-Options", "nosniff"],
           ["Referrer-Policy", "no-referrer"],
           ["Content-Security-Policy",
            "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self'; "
            "connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"],
           ["Cross-Origin-Opener-Policy", "same-origin"],
           ["Cross-Origin-Embedder-Policy", "require-corp"],
           ["Cross-Origin-Resource-Policy", "same-origin"],
           ["X-Frame-Options", "DENY"],
           ["Cache-Control", "no-store"],
       ])],
)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for name, (description, config, steps) in V.items():
        doc = {"description": description, "area": "admission", "config": config, "steps": steps}
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(V)} vectors to {OUT}")


if __name__ == "__main__":
    main()
