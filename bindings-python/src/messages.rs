//! The seven message classes of `stapel_runner_protocol.messages`: mutable Python objects
//! over the core's message structs. Parsing, validation and encoding are the core's
//! (`wire::from_object`, `Message::validate`, `wire::encode`); this module converts.

use indexmap::IndexMap;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use stapel_runner_protocol::json::{Number, Object, Value};
use stapel_runner_protocol::wire::{
    self, Hello, Message, MessageType, Nonce, Payload, Ping, Pong, SentAt, TaskAssign, TaskCancel,
    TaskProgress, TaskReportMessage,
};

use crate::errors::{decode_error, schema_error};
use crate::fields::{CText, Field, FrameSpan, Plain, Property, Slot, Text};
use crate::json::{number_to_py, object_to_py, py_to_object, type_name};

// The constructors' defaults (`schema_version=1`, `protocol_version=1`) are the seed's
// Python signature, spelled as literals so `help()` shows them; they must be the core's.
const _: () = assert!(wire::SCHEMA_VERSION == 1 && wire::PROTOCOL_VERSION == 1);

type Obj = Slot<Object>;

/// The error the core reports for fields of the wrong shape (e.g. `capabilities = [1]`):
/// the message's JSON (`json`) is decoded again.
fn shape_error(py: Python<'_>, json: impl FnOnce() -> PyResult<Object>) -> PyErr {
    let object = match json() {
        Ok(o) => o,
        Err(e) => return e,
    };
    match wire::from_object(object, false) {
        Err(e) => decode_error(py, &e),
        Ok(_) => PyTypeError::new_err("message fields have types the message cannot hold"),
    }
}

/// `Ping` and `Pong` report a field of the wrong shape (only `extra` can be) without
/// decoding their JSON.
fn extra_not_a_dict(_py: Python<'_>, _json: impl FnOnce() -> PyResult<Object>) -> PyErr {
    PyTypeError::new_err("extra must be a dict")
}

/// Append `extra` (a dict) to a message's JSON object with the core's rule (declared
/// keys are never overridden: `MessageType::append_extra`).
fn push_extra(py: Python<'_>, out: &mut Object, mt: MessageType, extra: &Obj) -> PyResult<()> {
    match extra.json(py)? {
        Value::Object(m) => {
            mt.append_extra(out, m);
            Ok(())
        }
        _ => Err(PyTypeError::new_err("extra must be a dict")),
    }
}

fn nonce_from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Nonce>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Nonce::Text(s.to_cow()?.into_owned())));
    }
    if obj.cast::<PyInt>().is_ok() && obj.cast::<PyBool>().is_err() {
        return Ok(Some(Nonce::Integer(obj.extract()?)));
    }
    Err(PyTypeError::new_err(format!(
        "nonce must be a str, an int or None, not {}",
        type_name(obj)
    )))
}

fn nonce_to_py<'py>(py: Python<'py>, n: &Option<Nonce>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match n {
        None => py.None().into_bound(py),
        Some(Nonce::Text(s)) => PyString::new(py, s).into_any(),
        Some(Nonce::Integer(i)) => i.into_pyobject(py)?.into_any(),
    })
}

fn sent_at_from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SentAt>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(SentAt::Text(s.to_cow()?.into_owned())));
    }
    if obj.cast::<PyBool>().is_err() {
        if obj.cast::<PyInt>().is_ok() {
            if let Ok(i) = obj.extract::<i64>() {
                return Ok(Some(SentAt::Number(i.into())));
            }
            if let Ok(u) = obj.extract::<u64>() {
                return Ok(Some(SentAt::Number(u.into())));
            }
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return Number::from_f64(f.value())
                .map(|n| Some(SentAt::Number(n)))
                .ok_or_else(|| PyValueError::new_err("sent_at must be finite"));
        }
    }
    Err(PyTypeError::new_err(format!(
        "sent_at must be a str, a number or None, not {}",
        type_name(obj)
    )))
}

fn sent_at_to_py<'py>(py: Python<'py>, t: &Option<SentAt>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match t {
        None => py.None().into_bound(py),
        Some(SentAt::Text(s)) => PyString::new(py, s).into_any(),
        Some(SentAt::Number(n)) => number_to_py(py, n)?,
    })
}

impl Plain for Option<Nonce> {
    type Arg<'a> = Option<Py<PyAny>>;
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self> {
        nonce_from_py(arg.as_ref().map(|o| o.bind(py)))
    }
    fn json(&self) -> Value {
        match self {
            None => Value::Null,
            Some(Nonce::Text(s)) => Value::from(s.as_str()),
            Some(Nonce::Integer(i)) => Value::from(*i),
        }
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        Ok(nonce_to_py(py, self)?.repr()?.to_string())
    }
}

impl Property for Option<Nonce> {
    fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(nonce_to_py(py, self)?.unbind())
    }
    fn set(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        *self = nonce_from_py(Some(value))?;
        Ok(())
    }
}

impl Plain for Option<SentAt> {
    type Arg<'a> = Option<Py<PyAny>>;
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self> {
        sent_at_from_py(arg.as_ref().map(|o| o.bind(py)))
    }
    fn json(&self) -> Value {
        match self {
            None => Value::Null,
            Some(SentAt::Text(s)) => Value::from(s.as_str()),
            Some(SentAt::Number(n)) => Value::from(n.clone()),
        }
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        Ok(sent_at_to_py(py, self)?.repr()?.to_string())
    }
}

impl Property for Option<SentAt> {
    fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(sent_at_to_py(py, self)?.unbind())
    }
    fn set(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        *self = sent_at_from_py(Some(value))?;
        Ok(())
    }
}

/// Build the message a dict describes, as the class `mt` (the dict's `type` is ignored).
fn from_dict_as<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    mt: MessageType,
    validate: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut object = py_to_object(data)?;
    object.insert("type", mt.as_str());
    match wire::from_object(object, validate) {
        Ok(m) => message_to_py(py, m),
        Err(e) => Err(decode_error(py, &e)),
    }
}

/// A core message as an instance of its Python class.
pub fn message_to_py(py: Python<'_>, m: Message) -> PyResult<Bound<'_, PyAny>> {
    Ok(match m {
        Message::Hello(m) => Bound::new(py, PyHello::from_core(m))?.into_any(),
        Message::TaskAssign(m) => Bound::new(py, PyTaskAssign::from_core(m))?.into_any(),
        Message::TaskProgress(m) => Bound::new(py, PyTaskProgress::from_core(m))?.into_any(),
        Message::TaskReport(m) => Bound::new(py, PyTaskReportMessage::from_core(m))?.into_any(),
        Message::TaskCancel(m) => Bound::new(py, PyTaskCancel::from_core(m))?.into_any(),
        Message::Ping(m) => Bound::new(py, PyPing::from_core(m))?.into_any(),
        Message::Pong(m) => Bound::new(py, PyPong::from_core(m))?.into_any(),
    })
}

/// A `task.progress` frame the core's fast path validated, as a `TaskProgress` whose
/// payload stays JSON text until it is first read or used.
///
/// With `frame` (the immutable `str` or `bytes` object whose UTF-8 buffer the view borrows
/// from) the message borrows its text from it instead of copying.
///
/// # Safety
/// When `frame` is given, the view's strings lie inside its UTF-8 buffer.
pub unsafe fn progress_from_view<'py>(
    py: Python<'py>,
    view: &wire::ProgressView<'_>,
    frame: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (task_id, kind, payload) = match frame {
        // SAFETY: the caller's contract; the message keeps `frame` (below).
        Some(_) => unsafe {
            (
                Text::Frame(FrameSpan::new(view.task_id)),
                Text::Frame(FrameSpan::new(view.kind)),
                Text::Frame(FrameSpan::new(view.payload)),
            )
        },
        None => (
            Text::Owned(view.task_id.into()),
            Text::Owned(view.kind.into()),
            Text::Owned(view.payload.to_owned()),
        ),
    };
    let m = PyTaskProgress {
        task_id,
        seq: view.seq,
        kind,
        payload: Slot::Text(payload),
        attempt: view.attempt,
        schema_version: wire::SCHEMA_VERSION,
        extra: Slot::default(),
        frame: frame.map(|f| f.clone().unbind()),
    };
    Ok(Bound::new(py, m)?.into_any())
}

/// The core message of a Python message object. A `dict` is built into a message with
/// the tolerant rules (`from_dict`).
///
/// # Errors
/// `TypeError` for other objects; the core's error for fields of the wrong shape.
pub fn message_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Message> {
    let py = obj.py();
    macro_rules! message {
        ($($ty:ty),*) => {$(
            if let Ok(m) = obj.cast::<$ty>() {
                return m.borrow().to_message(py);
            }
        )*};
    }
    message!(
        PyTaskProgress,
        PyTaskAssign,
        PyTaskReportMessage,
        PyTaskCancel,
        PyHello,
        PyPing,
        PyPong
    );
    if obj.cast::<PyDict>().is_ok() {
        return wire::from_object(py_to_object(obj)?, false).map_err(|e| decode_error(py, &e));
    }
    Err(PyTypeError::new_err(format!(
        "expected a protocol message or a dict, got {}",
        type_name(obj)
    )))
}

/// Run `f` on the core message of a Python message object without copying its native
/// containers: they are moved out, and moved back from the message `f` returns. A
/// `dict` is built into a message with the tolerant rules.
///
/// # Errors
/// As [`message_from_py`]; `f`'s own result is returned as is.
pub fn with_message<R>(
    obj: &Bound<'_, PyAny>,
    f: impl FnOnce(Message) -> (R, Message),
) -> PyResult<R> {
    let py = obj.py();
    macro_rules! lent {
        ($($ty:ty),*) => {$(
            if let Ok(c) = obj.cast::<$ty>() {
                let mut b = c.try_borrow_mut()?;
                let m = b.lend(py)?;
                let (r, back) = f(m);
                b.restore(back);
                return Ok(r);
            }
        )*};
    }
    lent!(
        PyTaskProgress,
        PyTaskAssign,
        PyTaskReportMessage,
        PyTaskCancel,
        PyHello,
        PyPing,
        PyPong
    );
    let m = message_from_py(obj)?;
    Ok(f(m).0)
}

/// `encode` of a `TaskProgress`, written straight from its Python objects with the core's
/// frame layout ([`crate::encode`]) — or, for a decoded message whose payload was never
/// read (so never changed), with the payload's validated text copied as it is when the
/// core's encoder would write the same bytes; `None` when the message is anything else
/// or not in the plain form (then the core's path encodes it). The other fields are
/// always written from their current values.
pub fn encode_fast<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyString>> {
    let py = obj.py();
    let c = obj.cast::<PyTaskProgress>().ok()?;
    let b = c.try_borrow().ok()?;
    let payload = fast_body(&b, py)?;
    let template = crate::encode::Template::get()?;
    template.write(&crate::encode::Fields {
        schema_version: b.schema_version,
        task_id: b.task_id.as_str(),
        seq: b.seq,
        kind: b.kind.as_str(),
        attempt: b.attempt,
        payload,
        py,
    })
}

/// The payload [`encode_fast`] writes: `None` when the message has `extra` fields or a
/// payload the core built and holds (the core's path then encodes it).
fn fast_body<'a, 'py>(
    b: &'a PyTaskProgress,
    py: Python<'py>,
) -> Option<crate::encode::Body<'a, 'py>> {
    use crate::encode::Body;
    if !b.extra.is_empty(py) {
        return None;
    }
    Some(match &b.payload {
        Slot::Py(p) => Body::Object(p.bind(py)),
        Slot::Text(text) => Body::Text(text.as_str()),
        // A payload the core holds: as text while nobody edited it.
        Slot::Native(p) => Body::Text(p.text()?),
    })
}

/// Whether `encode(message)` would copy the message's payload text as it is (a decoded
/// `TaskProgress` whose payload was never read, in the encoder's form, without `extra`):
/// tests, which hold that copy to the core's encoding.
#[pyfunction]
#[pyo3(name = "_encode_reuses_payload_text")]
pub fn encode_reuses_payload_text(message: &Bound<'_, PyAny>) -> bool {
    let Ok(c) = message.cast::<PyTaskProgress>() else {
        return false;
    };
    let Ok(b) = c.try_borrow() else {
        return false;
    };
    matches!(
        fast_body(&b, message.py()),
        Some(crate::encode::Body::Text(text)) if crate::encode::encoder_form(text.as_bytes()).is_some()
    )
}

/// What the sequencing state reads of a received message object — its type, `task_id`,
/// `attempt` and `seq` — as a core message with empty containers, read straight from the
/// object's fields (no attribute lookups, no conversion of `payload` & co.). `None` for
/// anything but the four sequenced message classes.
///
/// # Errors
/// `RuntimeError` when the object is mutably borrowed elsewhere.
pub fn sequencing_view(obj: &Bound<'_, PyAny>) -> PyResult<Option<Message>> {
    if let Ok(c) = obj.cast::<PyTaskProgress>() {
        let b = c.try_borrow()?;
        let mut m = TaskProgress::new(b.task_id.as_str(), "", Object::new());
        // (`task_id` is a `Text`: borrowed from the frame or owned.)
        (m.seq, m.attempt) = (b.seq, b.attempt);
        return Ok(Some(Message::TaskProgress(m)));
    }
    if let Ok(c) = obj.cast::<PyTaskReportMessage>() {
        let b = c.try_borrow()?;
        let mut m = TaskReportMessage::new(Default::default());
        (m.task_id, m.seq, m.attempt) = (b.task_id.clone(), b.seq, b.attempt);
        return Ok(Some(Message::TaskReport(m)));
    }
    if let Ok(c) = obj.cast::<PyTaskCancel>() {
        let b = c.try_borrow()?;
        let mut m = TaskCancel::new(b.task_id.as_str(), String::new());
        m.seq = b.seq;
        return Ok(Some(Message::TaskCancel(m)));
    }
    if let Ok(c) = obj.cast::<PyTaskAssign>() {
        let b = c.try_borrow()?;
        let mut m = TaskAssign::new(Default::default(), String::new(), Default::default());
        (m.task_id, m.seq, m.attempt) = (b.task_id.clone(), b.seq, b.attempt);
        return Ok(Some(Message::TaskAssign(m)));
    }
    Ok(None)
}

/// Set the `seq` of a Python message object (after the core stamped its copy).
pub fn set_seq(obj: &Bound<'_, PyAny>, seq: u64) -> PyResult<()> {
    if let Ok(m) = obj.cast::<PyTaskProgress>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskAssign>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskReportMessage>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskCancel>() {
        m.borrow_mut().seq = seq;
    }
    Ok(())
}

fn eq_messages(a: PyResult<Message>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let py = other.py();
    let not_impl = || py.NotImplemented();
    let a = match a {
        Ok(a) => a,
        Err(_) => return Ok(not_impl()),
    };
    if other.cast::<PyDict>().is_ok() {
        return Ok(not_impl());
    }
    match message_from_py(other) {
        Ok(b) => Ok(PyBool::new(py, a == b).to_owned().into_any().unbind()),
        Err(_) => Ok(not_impl()),
    }
}

fn to_dict_of<'py>(py: Python<'py>, m: PyResult<Message>) -> PyResult<Bound<'py, PyDict>> {
    object_to_py(py, &wire::to_object(&m?))
}

fn validate_message(py: Python<'_>, m: PyResult<Message>) -> PyResult<()> {
    m?.validate().map_err(|e| schema_error(py, &e))
}

/// One message class: a `#[pyclass]` over the core message `$core` (the variant
/// `Message::$variant`, wire type `$wire`) and every method that only moves its fields.
///
/// The fields are stated once, in `__new__`'s order, each `name: Type = default`: a
/// scalar carries `#[pyo3(get, set)]`; a field with `=> { /// doc  set_name }` gets a
/// property (`name` / `set_name`, through [`Property`]) with that doc. Each field is
/// handled through [`Field`]. `schema_version` and `extra`, last in every class, are added here.
/// `$mismatch` makes the error for fields of the wrong shape (from the message's JSON);
/// `$methods` are the class's own methods.
macro_rules! message_class {
    (
        $(#[$doc:meta])*
        $class:ident($name:literal, $variant:ident($core:ident), $wire:literal,
                     mismatch = $mismatch:ident) {
            $(
                $(#[$attr:meta])*
                $field:ident: $ty:ty = $default:tt
                $(=> { $(#[$prop_doc:meta])* $setter:ident })?,
            )*
        }
        { $($methods:tt)* }
    ) => {
        $(#[$doc])*
        #[pyclass(module = "stapel_runner_protocol.messages", name = $name, subclass)]
        pub struct $class {
            $($(#[$attr])* $field: $ty,)*
            #[pyo3(get, set)]
            schema_version: u64,
            extra: Obj,
            /// The frame object the message's [`Text::Frame`] spans borrow from (kept
            /// alive with the message; `None` when it borrows nothing). Never read: it only
            /// keeps the buffer alive.
            #[allow(dead_code)]
            frame: Option<Py<PyAny>>,
        }

        impl $class {
            /// Move the message out for the core (no copy of native containers); see
            /// [`restore`](Self::restore).
            fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
                let ($($field,)* extra) =
                    ($(Field::prepare(&self.$field, py)?,)* self.extra.prepare(py)?);
                if $($field.is_mismatch() ||)* extra.is_mismatch() {
                    return Err($mismatch(py, || self.to_json(py)));
                }
                Ok(Message::$variant($core {
                    schema_version: self.schema_version,
                    $($field: Field::take(&mut self.$field, $field),)*
                    extra: self.extra.take(extra),
                }))
            }
            /// `message` (an instance of this class) as an instance of `cls`: itself, or
            /// for a subclass `cls(**fields)` (as a dataclass's `from_dict` builds
            /// `cls(...)`).
            fn as_class<'py>(
                cls: &Bound<'py, pyo3::types::PyType>,
                message: Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let py = cls.py();
                if cls.is(&py.get_type::<Self>()) {
                    return Ok(message);
                }
                let kwargs = PyDict::new(py);
                $(kwargs.set_item(stringify!($field), message.getattr(stringify!($field))?)?;)*
                kwargs.set_item("schema_version", message.getattr("schema_version")?)?;
                kwargs.set_item("extra", message.getattr("extra")?)?;
                cls.call((), Some(&kwargs))
            }
            /// Take back the containers of a lent message.
            fn restore(&mut self, m: Message) {
                if let Message::$variant(m) = m {
                    $(Field::give_back(&mut self.$field, m.$field);)*
                    self.extra.give_back(m.extra);
                }
            }
            fn from_core(m: $core) -> Self {
                Self {
                    $($field: Field::from_core(m.$field),)*
                    schema_version: m.schema_version,
                    extra: Slot::Native(m.extra),
                    frame: None,
                }
            }
            /// The message as JSON, whatever the shape of its fields.
            fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
                let mut o = Object::new();
                o.insert("schema_version", self.schema_version);
                o.insert("type", $wire);
                $(o.insert(stringify!($field), Field::json(&self.$field, py)?);)*
                push_extra(py, &mut o, MessageType::$variant, &self.extra)?;
                Ok(o)
            }
            /// The core message (a copy).
            fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
                match ($(Field::native(&self.$field, py)?,)* self.extra.native(py)?) {
                    ($(Some($field),)* Some(extra)) => Ok(Message::$variant($core {
                        schema_version: self.schema_version,
                        $($field,)*
                        extra,
                    })),
                    _ => Err($mismatch(py, || self.to_json(py))),
                }
            }
        }

        #[pymethods]
        impl $class {
            /// The wire `type` of this class.
            #[classattr]
            const ARTIFACT: &'static str = $wire;

            #[new]
            #[pyo3(signature = ($($field = $default,)* schema_version = 1, extra = None))]
            #[allow(clippy::too_many_arguments)]
            fn new(
                py: Python<'_>,
                $($field: <$ty as Field>::Arg<'_>,)*
                schema_version: u64,
                extra: <Obj as Field>::Arg<'_>,
            ) -> PyResult<Self> {
                Ok(Self {
                    $($field: Field::from_arg(py, $field)?,)*
                    schema_version,
                    extra: Field::from_arg(py, extra)?,
                    frame: None,
                })
            }

            $($(
                $(#[$prop_doc])*
                #[getter]
                fn $field(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                    Property::get(&mut self.$field, py)
                }
                #[setter]
                fn $setter(&mut self, v: &Bound<'_, PyAny>) -> PyResult<()> {
                    Property::set(&mut self.$field, v)
                }
            )?)*

            /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
            #[getter]
            fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                self.extra.get(py)
            }
            #[setter]
            fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
                self.extra.set(v)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let fields = [
                    $(format!(concat!(stringify!($field), "={}"), Field::repr(&self.$field, py)?),)*
                    format!("schema_version={}", self.schema_version),
                    format!("extra={}", self.extra.repr(py)?),
                ];
                Ok(format!("{}({})", $name, fields.join(", ")))
            }

            /// Build a message from a dict with the tolerant rules of `decode` (absent
            /// fields take defaults, unknown keys go to `extra`). The dict's `type` is
            /// ignored: the class decides.
            #[classmethod]
            fn from_dict<'py>(
                cls: &Bound<'py, pyo3::types::PyType>,
                data: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyAny>> {
                Self::as_class(cls, from_dict_as(data.py(), data, MessageType::$variant, false)?)
            }

            /// `from_dict`, then (by default) full schema validation.
            #[classmethod]
            #[pyo3(signature = (data, *, validate = true))]
            fn parse<'py>(
                cls: &Bound<'py, pyo3::types::PyType>,
                data: &Bound<'py, PyAny>,
                validate: bool,
            ) -> PyResult<Bound<'py, PyAny>> {
                Self::as_class(cls, from_dict_as(data.py(), data, MessageType::$variant, validate)?)
            }

            /// The message as a dict, exactly as `encode` writes it.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                to_dict_of(py, self.to_message(py))
            }

            /// Check every schema rule; raises `SchemaValidationError`, returns `self`.
            fn validate(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
                let py = slf.py();
                validate_message(py, slf.borrow().to_message(py))?;
                Ok(slf)
            }

            fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                eq_messages(self.to_message(other.py()), other)
            }

            /// Pickling and copying go through `to_dict` / `from_dict`.
            #[allow(clippy::type_complexity)]
            fn __reduce__<'py>(
                slf: &Bound<'py, Self>,
            ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
                let py = slf.py();
                let from_dict = slf.get_type().getattr("from_dict")?;
                let d = to_dict_of(py, slf.borrow().to_message(py))?;
                Ok((from_dict, (d,)))
            }

            $($methods)*
        }
    };
}

// ------------------------------------------------------------------------------------

message_class! {
    /// `hello`, runner → hub: the first frame of every connection.
    PyHello("Hello", Hello(Hello), "hello", mismatch = shape_error) {
        #[pyo3(get, set)]
        project_id: String = "",
        #[pyo3(get, set)]
        runner_version: String = "",
        #[pyo3(get, set)]
        protocol_version: u64 = 1,
        capabilities: Slot<Vec<String>> = None => {
            /// Backends the runner can drive (open strings).
            set_capabilities
        },
        resume: Slot<IndexMap<String, u64>> = None => {
            /// Reconnect declaration: task id → last seq received contiguously from the hub.
            set_resume
        },
    }
    {}
}

message_class! {
    /// `task.assign`, hub → runner: run one attempt of a task.
    PyTaskAssign("TaskAssign", TaskAssign(TaskAssign), "task.assign", mismatch = shape_error) {
        #[pyo3(get, set)]
        task_id: String = "",
        task: Obj = None => {
            /// The TaskSpec object (a dict, keys in arrival order).
            set_task
        },
        #[pyo3(get, set)]
        role: String = "",
        invocation: Obj = None => {
            /// Model↔harness pairing and runtime wiring (a dict).
            set_invocation
        },
        #[pyo3(get, set)]
        seq: u64 = 0,
        #[pyo3(get, set)]
        attempt: u64 = 0,
    }
    {
        /// The embedded task as a validated `stapel_taskspecs.TaskSpec` (validation by the
        /// core; raises `SchemaValidationError` with locations under `task/`).
        #[getter]
        fn task_spec<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let task = match self.task.native(py)? {
                Some(t) => t,
                None => return Err(shape_error(py, || self.to_json(py))),
            };
            let probe = TaskAssign::new(task, "", Object::new());
            probe.task_spec().map_err(|e| schema_error(py, &e))?;
            let d = object_to_py(py, &probe.task)?;
            crate::errors::import_taskspecs(py)?
                .getattr("TaskSpec")?
                .call_method1("from_dict", (d,))
        }
    }
}

message_class! {
    /// `task.progress`, runner → hub.
    PyTaskProgress("TaskProgress", TaskProgress(TaskProgress), "task.progress",
                   mismatch = shape_error) {
        #[pyo3(get, set)]
        task_id: CText = "",
        #[pyo3(get, set)]
        seq: u64 = 0,
        #[pyo3(get, set)]
        kind: CText = "",
        payload: Slot<Payload> = None => {
            /// Kind-specific body (a dict, keys in arrival order).
            set_payload
        },
        #[pyo3(get, set)]
        attempt: u64 = 0,
    }
    {}
}

message_class! {
    /// `task.report`, runner → hub: the attempt's TaskReport.
    PyTaskReportMessage("TaskReportMessage", TaskReport(TaskReportMessage), "task.report",
                        mismatch = shape_error) {
        #[pyo3(get, set)]
        task_id: String = "",
        report: Obj = None => {
            /// The TaskReport object (a dict, keys in arrival order).
            set_report
        },
        #[pyo3(get, set)]
        seq: u64 = 0,
        #[pyo3(get, set)]
        attempt: u64 = 0,
    }
    {
        /// The embedded report as a validated `stapel_taskspecs.TaskReport` (validation by
        /// the core; raises `SchemaValidationError` with locations under `report/`).
        #[getter]
        fn report_model<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let report = match self.report.native(py)? {
                Some(r) => r,
                None => return Err(shape_error(py, || self.to_json(py))),
            };
            let probe = TaskReportMessage::new(report);
            probe.task_report().map_err(|e| schema_error(py, &e))?;
            let d = object_to_py(py, &probe.report)?;
            crate::errors::import_taskspecs(py)?
                .getattr("TaskReport")?
                .call_method1("from_dict", (d,))
        }
    }
}

message_class! {
    /// `task.cancel`, hub → runner: stop at the next automaton boundary.
    PyTaskCancel("TaskCancel", TaskCancel(TaskCancel), "task.cancel", mismatch = shape_error) {
        #[pyo3(get, set)]
        task_id: String = "",
        #[pyo3(get, set)]
        reason: String = "",
        #[pyo3(get, set)]
        seq: u64 = 0,
    }
    {}
}

message_class! {
    /// `ping`, either direction.
    PyPing("Ping", Ping(Ping), "ping", mismatch = extra_not_a_dict) {
        nonce: Option<Nonce> = None => {
            /// Token the pong echoes: a str, an int or None.
            set_nonce
        },
        sent_at: Option<SentAt> = None => {
            /// Optional send timestamp: a str, a number or None.
            set_sent_at
        },
    }
    {}
}

message_class! {
    /// `pong`, either direction: answers a `Ping`.
    PyPong("Pong", Pong(Pong), "pong", mismatch = extra_not_a_dict) {
        nonce: Option<Nonce> = None => {
            /// The answered ping's nonce: a str, an int or None.
            set_nonce
        },
    }
    {
        /// The pong answering `ping` (echoes its nonce).
        #[classmethod]
        fn answer(_cls: &Bound<'_, pyo3::types::PyType>, ping: PyRef<'_, PyPing>) -> Self {
            let core = Pong::answering(&Ping::new(ping.nonce.clone()));
            Self::from_core(core)
        }
    }
}
