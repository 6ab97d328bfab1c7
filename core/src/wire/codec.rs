//! `decode`, `validate` and `encode`.

use indexmap::IndexMap;

use super::artifacts::{TaskReport, TaskSpec, UsageSplit};
use super::check::{finish, Checker, Loc};
use super::error::{DecodeError, Rule, SchemaError, Violation};
use super::fast::{peek_progress, ProgressView};
use super::json::{parse_top, parse_top_str, Key, TopLevel};
use super::messages::*;
use super::payload::Payload;
use super::SCHEMA_VERSION;
use crate::json::{CompactString, Object, Value};

/// Decode one frame.
///
/// The frame must be one JSON object (surrounding whitespace allowed) with a `type` naming
/// one of the seven messages. Duplicate keys at any depth are rejected
/// ([`DecodeError::DuplicateKey`]).
///
/// * `validate == false` (tolerant): absent fields take their defaults (`schema_version`
///   1, `protocol_version` 1, empty strings, `seq`/`attempt` 0, empty lists and objects);
///   `null` counts as absent. A declared field whose JSON type cannot be represented by
///   the typed model (a string `seq`, a negative `attempt`, an integer beyond ±(2^53 − 1))
///   is still a [`DecodeError::Schema`].
/// * `validate == true`: additionally every rule of the message's schema and of its
///   embedded artifact (TaskSpec, TaskReport, UsageSplit) is checked, and all violations
///   are reported together, sorted by location.
///
/// # Errors
/// [`DecodeError`], with a stable [`code`](DecodeError::code).
pub fn decode(frame: &[u8], validate: bool) -> Result<Message, DecodeError> {
    if let Ok(text) = std::str::from_utf8(frame) {
        return decode_str(text, validate);
    }
    match parse_top(frame)? {
        TopLevel::Object(members) => from_members(members, validate),
        TopLevel::Other(found) => Err(DecodeError::NotObject { found }),
    }
}

/// [`decode`] for a frame that is already a `&str` (a framer line, a WebSocket text
/// message, a Python `str`): the same rules, without checking UTF-8 again.
///
/// # Errors
/// As [`decode`].
pub fn decode_str(frame: &str, validate: bool) -> Result<Message, DecodeError> {
    if let Some(view) = peek_progress(frame) {
        return Ok(Message::TaskProgress(progress_from_view(&view)));
    }
    decode_full(frame, validate)
}

/// [`decode_str`] of a frame the caller owns (a WebSocket text message, a framer line),
/// taking it over: a plain `task.progress` keeps the frame itself as its
/// [`Payload`]'s text, so decoding it copies nothing and, with a `task_id` and `kind` of
/// at most 24 bytes each, allocates nothing.
///
/// # Errors
/// As [`decode`].
pub fn decode_owned(frame: String, validate: bool) -> Result<Message, DecodeError> {
    let progress = peek_progress(&frame).map(|view| {
        let base = frame.as_ptr() as usize;
        let start = (view.payload.as_ptr() as usize).wrapping_sub(base);
        let span = (start, start.wrapping_add(view.payload.len()));
        (fields_of(&view), span)
    });
    match progress {
        Some((mut m, (start, end))) => {
            m.payload = Payload::from_validated(frame, start, end);
            Ok(Message::TaskProgress(m))
        }
        None => decode_full(&frame, validate),
    }
}

/// [`decode_str`] without the fast path: every frame is parsed into values and checked
/// rule by rule, and a `task.progress` payload is built as an [`Object`]. The same
/// answers as `decode_str` (the fast path is tested against this function, see
/// `core/tests/fast_props.rs`); it is slower, and a binding has no reason to call it.
///
/// # Errors
/// As [`decode`].
pub fn decode_full(frame: &str, validate: bool) -> Result<Message, DecodeError> {
    match parse_top_str(frame)? {
        TopLevel::Object(members) => from_members(members, validate),
        TopLevel::Other(found) => Err(DecodeError::NotObject { found }),
    }
}

/// The message of a fast-path view, its payload text copied into a string of its own.
pub(crate) fn progress_from_view(view: &ProgressView<'_>) -> TaskProgress {
    let mut m = fields_of(view);
    let text = view.payload;
    m.payload = Payload::from_validated(text.to_owned(), 0, text.len());
    m
}

/// A `task.progress` with the view's fixed fields and an empty payload.
fn fields_of(view: &ProgressView<'_>) -> TaskProgress {
    TaskProgress {
        schema_version: SCHEMA_VERSION,
        task_id: CompactString::from(view.task_id),
        seq: view.seq,
        kind: CompactString::from(view.kind),
        attempt: view.attempt,
        payload: Payload::new(),
        extra: Object::new(),
    }
}

/// Build a message from an already-parsed JSON object (the bindings' `from_dict`), with
/// the same rules as [`decode`].
///
/// An object nesting deeper than [`MAX_DEPTH`](crate::json::MAX_DEPTH) levels (itself
/// the first) is refused as the decoder refuses its text ([`DecodeError::too_deep`]).
///
/// # Errors
/// As [`decode`], minus the parse errors.
pub fn from_object(object: Object, validate: bool) -> Result<Message, DecodeError> {
    super::as_type::check_object_depth(&object)?;
    from_members(
        object
            .into_iter()
            .map(|(k, v)| (Key::from_string(k), v))
            .collect(),
        validate,
    )
}

/// Build a message from any JSON value (see [`from_object`]).
///
/// # Errors
/// [`DecodeError::NotObject`] when `value` is not an object; otherwise as [`from_object`].
pub fn from_value(value: Value, validate: bool) -> Result<Message, DecodeError> {
    match value {
        Value::Object(m) => from_object(m, validate),
        other => Err(DecodeError::NotObject {
            found: other.type_name(),
        }),
    }
}

/// A field's slot while decoding: absent, present but unusable, or a value.
enum Slot<T> {
    Missing,
    Bad,
    Got(T),
}

impl<T> Slot<T> {
    fn from(opt: Option<T>) -> Self {
        opt.map_or(Slot::Bad, Slot::Got)
    }
    fn or_default(self) -> T
    where
        T: Default,
    {
        match self {
            Slot::Got(v) => v,
            _ => T::default(),
        }
    }
    fn is_missing(&self) -> bool {
        matches!(self, Slot::Missing)
    }
}

/// Decoding context: collects violations.
struct Ctx {
    out: Vec<Violation>,
}

impl Ctx {
    fn checker(&mut self) -> Checker<'_> {
        Checker { out: &mut self.out }
    }
    fn string(&mut self, key: &str, v: Value) -> Slot<String> {
        match v {
            Value::String(s) => Slot::Got(s.into_string()),
            other => {
                self.checker().type_error(Loc::Path(key), "string", &other);
                Slot::Bad
            }
        }
    }
    fn uint(&mut self, key: &str, v: &Value) -> Slot<u64> {
        Slot::from(self.checker().uint(Loc::Path(key), v))
    }
    fn object(&mut self, key: &str, v: Value) -> Slot<Object> {
        match v {
            Value::Object(m) => Slot::Got(m),
            other => {
                self.checker().type_error(Loc::Path(key), "object", &other);
                Slot::Bad
            }
        }
    }
    fn string_list(&mut self, key: &str, v: Value) -> Slot<Vec<String>> {
        match v {
            Value::Array(items) => {
                let mut ok = true;
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.into_string()),
                        other => {
                            ok = false;
                            self.checker().type_error(
                                Loc::Index(&Loc::Path(key), i),
                                "string",
                                &other,
                            );
                        }
                    }
                }
                if ok {
                    Slot::Got(out)
                } else {
                    Slot::Bad
                }
            }
            other => {
                self.checker().type_error(Loc::Path(key), "array", &other);
                Slot::Bad
            }
        }
    }
    fn resume(&mut self, key: &str, v: Value) -> Slot<IndexMap<String, u64>> {
        match v {
            Value::Object(m) => {
                let mut ok = true;
                let mut out = IndexMap::with_capacity(m.len());
                for (task, seq) in m {
                    match self.checker().uint(Loc::Key(&Loc::Path(key), &task), &seq) {
                        Some(s) => {
                            out.insert(task.into_string(), s);
                        }
                        None => ok = false,
                    }
                }
                if ok {
                    Slot::Got(out)
                } else {
                    Slot::Bad
                }
            }
            other => {
                self.checker().type_error(Loc::Path(key), "object", &other);
                Slot::Bad
            }
        }
    }
    fn nonce(&mut self, key: &str, v: &Value) -> Slot<Nonce> {
        match v {
            Value::String(s) => Slot::Got(Nonce::Text(s.to_string())),
            Value::Number(_) => {
                Slot::from(self.checker().int(Loc::Path(key), v).map(Nonce::Integer))
            }
            other => {
                self.checker()
                    .type_error(Loc::Path(key), "string or integer", other);
                Slot::Bad
            }
        }
    }
    fn sent_at(&mut self, key: &str, v: Value) -> Slot<SentAt> {
        match v {
            Value::String(s) => Slot::Got(SentAt::Text(s.into_string())),
            Value::Number(n) => Slot::Got(SentAt::Number(n)),
            other => {
                self.checker()
                    .type_error(Loc::Path(key), "string or number", &other);
                Slot::Bad
            }
        }
    }
    fn require<T>(&mut self, validate: bool, key: &str, slot: &Slot<T>) {
        if validate && slot.is_missing() {
            self.out.push(Violation::new(
                key,
                Rule::Required,
                "required field is missing",
            ));
        }
    }
}

fn from_members(members: Vec<(Key, Value)>, validate: bool) -> Result<Message, DecodeError> {
    let mtype = match members
        .iter()
        .find(|(k, _)| *k == Key::Known("type"))
        .map(|(_, v)| v)
    {
        Some(Value::String(t)) => match MessageType::from_wire(t) {
            Some(mt) => mt,
            None => {
                return Err(DecodeError::UnknownType {
                    type_name: Some(t.to_string()),
                })
            }
        },
        _ => return Err(DecodeError::UnknownType { type_name: None }),
    };
    let mut ctx = Ctx { out: Vec::new() };
    let mut schema_version = Slot::Missing;
    let mut extra = Object::new();
    // Every declared key lands in one of these; which ones a type uses is decided below.
    let mut s: [Slot<String>; 4] = [Slot::Missing, Slot::Missing, Slot::Missing, Slot::Missing];
    let (mut seq, mut attempt, mut protocol_version) =
        (Slot::Missing, Slot::Missing, Slot::Missing);
    let (mut obj_a, mut obj_b) = (Slot::Missing, Slot::Missing);
    let (mut capabilities, mut resume) = (Slot::Missing, Slot::Missing);
    let (mut nonce, mut sent_at) = (Slot::Missing, Slot::Missing);

    // String slots: s[0] = task_id; s[1] = project_id | role | kind | reason; s[2] = runner_version.
    for (key, value) in members {
        // Tolerant decoding treats null as absent; validation reports it as a type error.
        if !validate
            && value.is_null()
            && key.as_str() != "type"
            && mtype.keys().contains(&key.as_str())
        {
            continue;
        }
        match (mtype, key.as_str()) {
            (_, "type") => {}
            (_, "schema_version") => schema_version = ctx.uint("schema_version", &value),
            (MessageType::Hello, "protocol_version") => {
                protocol_version = ctx.uint("protocol_version", &value)
            }
            (MessageType::Hello, "project_id") => s[1] = ctx.string("project_id", value),
            (MessageType::Hello, "runner_version") => s[2] = ctx.string("runner_version", value),
            (MessageType::Hello, "capabilities") => {
                capabilities = ctx.string_list("capabilities", value)
            }
            (MessageType::Hello, "resume") => resume = ctx.resume("resume", value),
            (
                MessageType::TaskAssign
                | MessageType::TaskProgress
                | MessageType::TaskReport
                | MessageType::TaskCancel,
                "task_id",
            ) => s[0] = ctx.string("task_id", value),
            (
                MessageType::TaskAssign
                | MessageType::TaskProgress
                | MessageType::TaskReport
                | MessageType::TaskCancel,
                "seq",
            ) => seq = ctx.uint("seq", &value),
            (
                MessageType::TaskAssign | MessageType::TaskProgress | MessageType::TaskReport,
                "attempt",
            ) => attempt = ctx.uint("attempt", &value),
            (MessageType::TaskAssign, "task") => obj_a = ctx.object("task", value),
            (MessageType::TaskAssign, "role") => s[1] = ctx.string("role", value),
            (MessageType::TaskAssign, "invocation") => obj_b = ctx.object("invocation", value),
            (MessageType::TaskProgress, "kind") => s[1] = ctx.string("kind", value),
            (MessageType::TaskProgress, "payload") => obj_a = ctx.object("payload", value),
            (MessageType::TaskReport, "report") => obj_a = ctx.object("report", value),
            (MessageType::TaskCancel, "reason") => s[1] = ctx.string("reason", value),
            (MessageType::Ping | MessageType::Pong, "nonce") => nonce = ctx.nonce("nonce", &value),
            (MessageType::Ping, "sent_at") => sent_at = ctx.sent_at("sent_at", value),
            _ => {
                extra.push_unchecked(key.into_compact(), value);
            }
        }
    }

    ctx.require(validate, "schema_version", &schema_version);
    let schema_version = match schema_version {
        Slot::Got(v) => v,
        _ => SCHEMA_VERSION,
    };
    let [task_id, s1, s2, _] = s;

    let msg = match mtype {
        MessageType::Hello => {
            ctx.require(validate, "protocol_version", &protocol_version);
            ctx.require(validate, "project_id", &s1);
            ctx.require(validate, "runner_version", &s2);
            Message::Hello(Hello {
                schema_version,
                protocol_version: match protocol_version {
                    Slot::Got(v) => v,
                    _ => super::PROTOCOL_VERSION,
                },
                project_id: s1.or_default(),
                runner_version: s2.or_default(),
                capabilities: capabilities.or_default(),
                resume: resume.or_default(),
                extra,
            })
        }
        MessageType::TaskAssign => {
            ctx.require(validate, "task", &obj_a);
            ctx.require(validate, "role", &s1);
            ctx.require(validate, "invocation", &obj_b);
            ctx.require(validate, "seq", &seq);
            let task: Object = obj_a.or_default();
            let task_id = match task_id {
                Slot::Got(t) => t,
                other => {
                    let mirrored = task.get("id").and_then(Value::as_str).map(str::to_owned);
                    if mirrored.is_none() {
                        ctx.require(validate, "task_id", &other);
                    }
                    mirrored.unwrap_or_default()
                }
            };
            Message::TaskAssign(TaskAssign {
                schema_version,
                task_id,
                task,
                role: s1.or_default(),
                invocation: obj_b.or_default(),
                seq: seq.or_default(),
                attempt: attempt.or_default(),
                extra,
            })
        }
        MessageType::TaskProgress => {
            ctx.require(validate, "task_id", &task_id);
            ctx.require(validate, "seq", &seq);
            ctx.require(validate, "kind", &s1);
            ctx.require(validate, "payload", &obj_a);
            Message::TaskProgress(TaskProgress {
                schema_version,
                task_id: task_id.or_default().into(),
                seq: seq.or_default(),
                kind: s1.or_default().into(),
                attempt: attempt.or_default(),
                payload: Payload::from(obj_a.or_default()),
                extra,
            })
        }
        MessageType::TaskReport => {
            ctx.require(validate, "report", &obj_a);
            ctx.require(validate, "seq", &seq);
            let report: Object = obj_a.or_default();
            let task_id = match task_id {
                Slot::Got(t) => t,
                other => {
                    let mirrored = report
                        .get("task_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    if mirrored.is_none() {
                        ctx.require(validate, "task_id", &other);
                    }
                    mirrored.unwrap_or_default()
                }
            };
            Message::TaskReport(TaskReportMessage {
                schema_version,
                task_id,
                report,
                seq: seq.or_default(),
                attempt: attempt.or_default(),
                extra,
            })
        }
        MessageType::TaskCancel => {
            ctx.require(validate, "task_id", &task_id);
            ctx.require(validate, "reason", &s1);
            ctx.require(validate, "seq", &seq);
            Message::TaskCancel(TaskCancel {
                schema_version,
                task_id: task_id.or_default(),
                reason: s1.or_default(),
                seq: seq.or_default(),
                extra,
            })
        }
        MessageType::Ping => Message::Ping(Ping {
            schema_version,
            nonce: slot_opt(nonce),
            sent_at: slot_opt(sent_at),
            extra,
        }),
        MessageType::Pong => Message::Pong(Pong {
            schema_version,
            nonce: slot_opt(nonce),
            extra,
        }),
    };
    if validate {
        check_message(&msg, &mut ctx.out);
    }
    if ctx.out.is_empty() {
        Ok(msg)
    } else {
        Err(DecodeError::Schema {
            violations: finish(ctx.out),
        })
    }
}

fn slot_opt<T>(slot: Slot<T>) -> Option<T> {
    match slot {
        Slot::Got(v) => Some(v),
        _ => None,
    }
}

/// The schema rules that can be checked on a typed message (everything but presence and
/// JSON types, which the typed model guarantees).
fn check_message(msg: &Message, out: &mut Vec<Violation>) {
    let mut c = Checker { out };
    let sv = match msg {
        Message::Hello(m) => m.schema_version,
        Message::TaskAssign(m) => m.schema_version,
        Message::TaskProgress(m) => m.schema_version,
        Message::TaskReport(m) => m.schema_version,
        Message::TaskCancel(m) => m.schema_version,
        Message::Ping(m) => m.schema_version,
        Message::Pong(m) => m.schema_version,
    };
    if sv != SCHEMA_VERSION {
        c.push(
            Loc::Path("schema_version"),
            Rule::Const,
            format!("must be 1, found {sv}"),
        );
    }
    let range = |c: &mut Checker<'_>, loc: &str, v: u64| {
        if v > super::MAX_SAFE_INTEGER {
            c.push(
                Loc::Path(loc),
                Rule::Range,
                format!("{v} is above 2^53 - 1"),
            );
        }
    };
    match msg {
        Message::Hello(m) => {
            if m.protocol_version < 1 {
                c.push(
                    Loc::Path("protocol_version"),
                    Rule::Minimum,
                    "must be at least 1",
                );
            }
            range(&mut c, "protocol_version", m.protocol_version);
            if m.project_id.is_empty() {
                c.push(
                    Loc::Path("project_id"),
                    Rule::MinLength,
                    "must have at least 1 character(s)",
                );
            }
            for (task, seq) in &m.resume {
                if *seq > super::MAX_SAFE_INTEGER {
                    c.push(
                        Loc::Key(&Loc::Path("resume"), task),
                        Rule::Range,
                        format!("{seq} is above 2^53 - 1"),
                    );
                }
            }
        }
        Message::TaskAssign(m) => {
            nonempty(&mut c, "task_id", &m.task_id);
            range(&mut c, "seq", m.seq);
            range(&mut c, "attempt", m.attempt);
            TaskSpec::check(&m.task, "task", c.out);
            if let Some(Value::String(id)) = m.task.get("id") {
                if !m.task_id.is_empty() && *id != m.task_id {
                    c.push(
                        Loc::Path("task_id"),
                        Rule::Mismatch,
                        format!("task_id {:?} differs from task.id {id:?}", m.task_id),
                    );
                }
            }
            check_invocation(&m.invocation, c.out);
        }
        Message::TaskProgress(m) => {
            nonempty(&mut c, "task_id", &m.task_id);
            range(&mut c, "seq", m.seq);
            range(&mut c, "attempt", m.attempt);
            if m.kind == progress_kind::USAGE {
                if let Err(e) = UsageSplit::from_payload(&m.payload) {
                    c.out.extend(e.violations);
                }
            }
        }
        Message::TaskReport(m) => {
            nonempty(&mut c, "task_id", &m.task_id);
            range(&mut c, "seq", m.seq);
            range(&mut c, "attempt", m.attempt);
            TaskReport::check(&m.report, "report", c.out);
            if let Some(Value::String(id)) = m.report.get("task_id") {
                if !m.task_id.is_empty() && *id != m.task_id {
                    c.push(
                        Loc::Path("task_id"),
                        Rule::Mismatch,
                        format!("task_id {:?} differs from report.task_id {id:?}", m.task_id),
                    );
                }
            }
        }
        Message::TaskCancel(m) => {
            nonempty(&mut c, "task_id", &m.task_id);
            range(&mut c, "seq", m.seq);
        }
        Message::Ping(m) => {
            check_nonce(&mut c, &m.nonce);
        }
        Message::Pong(m) => check_nonce(&mut c, &m.nonce),
    }
}

fn nonempty(c: &mut Checker<'_>, loc: &str, v: &str) {
    if v.is_empty() {
        c.push(
            Loc::Path(loc),
            Rule::MinLength,
            "must have at least 1 character(s)",
        );
    }
}

fn check_nonce(c: &mut Checker<'_>, nonce: &Option<Nonce>) {
    if let Some(Nonce::Integer(i)) = nonce {
        if i.unsigned_abs() > super::MAX_SAFE_INTEGER {
            c.push(
                Loc::Path("nonce"),
                Rule::Range,
                format!("{i} is outside ±(2^53 - 1)"),
            );
        }
    }
}

const INVOCATION: Loc<'static> = Loc::Path("invocation");

fn check_invocation(inv: &Object, out: &mut Vec<Violation>) {
    let mut c = Checker { out };
    for key in [
        "backend",
        "model",
        "session",
        "system_prompt_ref",
        "llm_base_url",
    ] {
        if let Some(v) = inv.get(key) {
            c.string(Loc::Key(&INVOCATION, key), v, 0);
        }
    }
    if let Some(v) = inv.get("allowed_tools") {
        c.string_array(Loc::Key(&INVOCATION, "allowed_tools"), v, 0);
    }
    if let Some(v) = inv.get("budget") {
        c.object(Loc::Key(&INVOCATION, "budget"), v);
    }
}

impl Message {
    /// Check every schema rule of the message and its embedded artifact.
    ///
    /// # Errors
    /// [`SchemaError`] listing every violation, sorted by location.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let mut out = Vec::new();
        match self {
            Message::TaskAssign(m) if m.task_id.is_empty() && !m.task.contains_key("id") => out
                .push(Violation::new(
                    "task_id",
                    Rule::Required,
                    "required field is missing",
                )),
            _ => {}
        }
        check_message(self, &mut out);
        if out.is_empty() {
            Ok(())
        } else {
            Err(SchemaError {
                violations: finish(out),
            })
        }
    }

    /// `true` when [`validate`](Self::validate) passes.
    pub fn is_valid(&self) -> bool {
        self.validate().is_ok()
    }
}

// ---------------------------------------------------------------------------------------
// Encoding

/// Encode a message as one compact JSON frame (no trailing newline).
///
/// Deterministic and byte-stable: declared keys in the fixed per-type order, then `extra`
/// in its order (a key colliding with a declared field is skipped); an optional field that
/// is null, `[]` or `{}` is omitted, a required one always emitted; UTF-8 without ASCII
/// escaping (only `"`, `\` and control characters are escaped).
pub fn encode(msg: &Message) -> String {
    let mut buf = Vec::with_capacity(256);
    encode_into(msg, &mut buf);
    // The writer emits only UTF-8: JSON punctuation, serde_json strings and numbers.
    String::from_utf8(buf).unwrap_or_default()
}

/// Encode a message, appending the bytes to `buf`.
pub fn encode_into(msg: &Message, buf: &mut Vec<u8>) {
    let mut w = Writer { buf, first: true };
    w.buf.push(b'{');
    for_each_field(msg, |key, field| {
        w.key(key);
        match field {
            Field::Str(s) => w.str(s),
            Field::U64(v) => w.u64(v),
            Field::Object(m) => w.value(m),
            Field::Payload(p) => match p.canonical_text() {
                Some(text) => w.buf.extend_from_slice(text.as_bytes()),
                None => w.value(p.object()),
            },
            Field::StrList(l) => w.value(l),
            Field::Resume(r) => w.value(r),
            Field::Nonce(n) => w.nonce(n),
            Field::SentAt(SentAt::Text(s)) => w.str(s),
            Field::SentAt(SentAt::Number(n)) => w.value(n),
            Field::Extra(v) => w.value(v),
        }
    });
    w.buf.push(b'}');
}

/// The message as a JSON object, exactly as [`encode`] would emit it (same keys, same
/// order, same omissions), built directly without encoding.
pub fn to_object(msg: &Message) -> Object {
    let mut out = Object::with_capacity(8);
    for_each_field(msg, |key, field| {
        let value = match field {
            Field::Str(s) => Value::from(s),
            Field::U64(v) => Value::from(v),
            Field::Object(m) => Value::Object(m.clone()),
            Field::Payload(p) => Value::Object(p.object().clone()),
            Field::StrList(l) => Value::Array(l.iter().map(|s| Value::from(s.as_str())).collect()),
            Field::Resume(r) => Value::Object(
                r.iter()
                    .map(|(k, v)| (k.as_str(), Value::from(*v)))
                    .collect(),
            ),
            Field::Nonce(Nonce::Text(s)) => Value::from(s.as_str()),
            Field::Nonce(Nonce::Integer(i)) => Value::from(*i),
            Field::SentAt(SentAt::Text(s)) => Value::from(s.as_str()),
            Field::SentAt(SentAt::Number(n)) => Value::Number(n.clone()),
            Field::Extra(v) => v.clone(),
        };
        out.push_unchecked(key.into(), value);
    });
    out
}

/// One top-level field of a message, borrowed.
enum Field<'a> {
    Str(&'a str),
    U64(u64),
    Object(&'a Object),
    Payload(&'a Payload),
    StrList(&'a [String]),
    Resume(&'a IndexMap<String, u64>),
    Nonce(&'a Nonce),
    SentAt(&'a SentAt),
    Extra(&'a Value),
}

/// Visit the fields `encode` emits, in encoding order: declared keys in the fixed
/// per-type order (optional ones omitted when null, `[]` or `{}`), then `extra` in its
/// order, skipping keys that collide with a declared field. The one place that decides
/// what a frame contains.
fn for_each_field<'a>(msg: &'a Message, mut f: impl FnMut(&'a str, Field<'a>)) {
    let (sv, extra) = match msg {
        Message::Hello(m) => (m.schema_version, &m.extra),
        Message::TaskAssign(m) => (m.schema_version, &m.extra),
        Message::TaskProgress(m) => (m.schema_version, &m.extra),
        Message::TaskReport(m) => (m.schema_version, &m.extra),
        Message::TaskCancel(m) => (m.schema_version, &m.extra),
        Message::Ping(m) => (m.schema_version, &m.extra),
        Message::Pong(m) => (m.schema_version, &m.extra),
    };
    let mt = msg.message_type();
    f("schema_version", Field::U64(sv));
    f("type", Field::Str(mt.as_str()));
    match msg {
        Message::Hello(m) => {
            f("protocol_version", Field::U64(m.protocol_version));
            f("project_id", Field::Str(&m.project_id));
            f("runner_version", Field::Str(&m.runner_version));
            if !m.capabilities.is_empty() {
                f("capabilities", Field::StrList(&m.capabilities));
            }
            if !m.resume.is_empty() {
                f("resume", Field::Resume(&m.resume));
            }
        }
        Message::TaskAssign(m) => {
            f("task_id", Field::Str(&m.task_id));
            f("task", Field::Object(&m.task));
            f("role", Field::Str(&m.role));
            f("invocation", Field::Object(&m.invocation));
            f("seq", Field::U64(m.seq));
            f("attempt", Field::U64(m.attempt));
        }
        Message::TaskProgress(m) => {
            f("task_id", Field::Str(&m.task_id));
            f("seq", Field::U64(m.seq));
            f("kind", Field::Str(&m.kind));
            f("attempt", Field::U64(m.attempt));
            f("payload", Field::Payload(&m.payload));
        }
        Message::TaskReport(m) => {
            f("task_id", Field::Str(&m.task_id));
            f("report", Field::Object(&m.report));
            f("seq", Field::U64(m.seq));
            f("attempt", Field::U64(m.attempt));
        }
        Message::TaskCancel(m) => {
            f("task_id", Field::Str(&m.task_id));
            f("reason", Field::Str(&m.reason));
            f("seq", Field::U64(m.seq));
        }
        Message::Ping(m) => {
            if let Some(n) = &m.nonce {
                f("nonce", Field::Nonce(n));
            }
            if let Some(t) = &m.sent_at {
                f("sent_at", Field::SentAt(t));
            }
        }
        Message::Pong(m) => {
            if let Some(n) = &m.nonce {
                f("nonce", Field::Nonce(n));
            }
        }
    }
    for (k, v) in extra {
        if !mt.is_declared(k) {
            f(k, Field::Extra(v));
        }
    }
}

struct Writer<'a> {
    buf: &'a mut Vec<u8>,
    first: bool,
}

impl Writer<'_> {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        self.str(k);
        self.buf.push(b':');
    }
    fn str(&mut self, s: &str) {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *self.buf, s);
    }
    fn u64(&mut self, v: u64) {
        let mut b = itoa_buf(v);
        self.buf.extend_from_slice(b.as_bytes_mut());
    }
    fn value<T: serde::Serialize + ?Sized>(&mut self, v: &T) {
        let _ = serde_json::to_writer(&mut *self.buf, v);
    }
    fn nonce(&mut self, n: &Nonce) {
        match n {
            Nonce::Text(s) => self.str(s),
            Nonce::Integer(i) => {
                let _ = serde_json::to_writer(&mut *self.buf, i);
            }
        }
    }
}

/// Decimal digits of a u64 without allocation.
struct Digits {
    bytes: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_bytes_mut(&mut self) -> &[u8] {
        self.bytes.get(self.start..).unwrap_or_default()
    }
}

fn itoa_buf(mut v: u64) -> Digits {
    let mut bytes = [0u8; 20];
    // Filled from the end; `u64::MAX` has 20 digits, so the loop always breaks.
    let mut start = 0;
    for (i, slot) in bytes.iter_mut().enumerate().rev() {
        // `b'0' | d` is `b'0' + d` for a digit `d`.
        *slot = b'0' | (v % 10) as u8;
        v /= 10;
        if v == 0 {
            start = i;
            break;
        }
    }
    Digits { bytes, start }
}
