//! Storage of container fields of the message classes.
//!
//! A decoded message keeps its containers (`task`, `payload`, `extra`, …) as Rust values
//! and builds the Python object only when the attribute is first read; from then on the
//! Python object is the field (so `msg.extra["k"] = v` is seen by `encode`). Values set
//! from Python are stored as given, like a dataclass field, and converted when the
//! message is encoded or validated. A field decoded by the core's fast path
//! (`wire::peek_progress`) is kept as its validated JSON text ([`Slot::Text`]) and built
//! straight into Python objects on first read, or parsed for the core on first use.

use indexmap::IndexMap;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use stapel_runner_protocol::json::{CompactString, Object, Value};
use stapel_runner_protocol::wire::Payload;

use crate::json::{object_to_py, py_to_jvalue, py_to_object, strings_to_py, text_to_py};

/// Text a message holds: owned, or borrowed from the immutable frame object (`str` or
/// `bytes`) it was decoded from, which the message keeps alive (its `frame` field) — a
/// decoded `task.progress` copies nothing out of its frame. `S` is the core's string type
/// of the field (`String`, or `CompactString` for `task.progress`'s `task_id` and `kind`),
/// so lending owned text to the core moves it.
pub enum Text<S = String> {
    /// Owned text.
    Owned(S),
    /// A span of the message's frame object's UTF-8.
    Frame(FrameSpan),
}

/// The core string types a [`Text`] field can hold.
pub trait TextStorage: Default + std::ops::Deref<Target = str> + for<'a> From<&'a str> {}
impl TextStorage for String {}
impl TextStorage for CompactString {}

/// A `task.progress` text field (`task_id`, `kind`): the core holds it as a
/// `CompactString`.
pub type CText = Text<CompactString>;

/// UTF-8 text inside the immutable buffer of the frame object (a `str`'s UTF-8 view or a
/// `bytes` object's buffer) that the message holding the span keeps alive. Spans never
/// leave their message: cloning or lending one copies the text.
pub struct FrameSpan {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the span only reads an immutable buffer that its message keeps alive through a
// `Py<PyAny>` (itself `Send + Sync`); no thread mutates a `str` or `bytes` buffer.
unsafe impl Send for FrameSpan {}
// SAFETY: as above.
unsafe impl Sync for FrameSpan {}

impl FrameSpan {
    /// The span `text`.
    ///
    /// # Safety
    /// `text` lies inside the UTF-8 buffer of an immutable `str` (its UTF-8 view) or
    /// `bytes` object that the message holding the span keeps alive for as long as it
    /// holds the span.
    pub unsafe fn new(text: &str) -> Self {
        Self {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: `new`'s contract: valid UTF-8 in a buffer kept alive and unchanged
        // while the span exists.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr, self.len)) }
    }
}

impl<S: TextStorage> Text<S> {
    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            Text::Owned(s) => s,
            Text::Frame(f) => f.as_str(),
        }
    }
}

impl<S: TextStorage> Clone for Text<S> {
    fn clone(&self) -> Self {
        Text::Owned(S::from(self.as_str()))
    }
}

impl<'py, S: TextStorage> IntoPyObject<'py> for &Text<S> {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(crate::pyobj::value_str(py, self.as_str()))
    }
}

impl<'a, 'py, S: TextStorage> FromPyObject<'a, 'py> for Text<S> {
    type Error = PyErr;
    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let s = obj.cast::<PyString>()?;
        Ok(Text::Owned(S::from(&*s.to_cow()?)))
    }
}

impl<S: TextStorage> Field for Text<S> {
    type Core = S;
    type Arg<'a> = &'a str;
    fn from_arg(_py: Python<'_>, arg: &str) -> PyResult<Self> {
        Ok(Text::Owned(S::from(arg)))
    }
    fn from_core(value: S) -> Self {
        Text::Owned(value)
    }
    fn native(&self, _py: Python<'_>) -> PyResult<Option<S>> {
        Ok(Some(S::from(self.as_str())))
    }
    fn prepare(&self, _py: Python<'_>) -> PyResult<Lend<S>> {
        Ok(Lend::Native)
    }
    /// Owned text is moved out (and comes back in `give_back`); borrowed text is copied.
    fn take(&mut self, _prepared: Lend<S>) -> S {
        match self {
            Text::Owned(s) => std::mem::take(s),
            Text::Frame(f) => S::from(f.as_str()),
        }
    }
    fn give_back(&mut self, value: S) {
        if let Text::Owned(s) = self {
            *s = value;
        }
    }
    fn json(&self, _py: Python<'_>) -> PyResult<Value> {
        Ok(Value::from(self.as_str()))
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        Plain::repr(&self.as_str().to_owned(), py)
    }
}

/// A container type a field can hold natively.
pub trait Native: Sized + Default + Clone + PartialEq {
    /// As a new Python object.
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
    /// From a Python object: `Ok(None)` when the object has the wrong shape (the core
    /// then reports the violation), `Err` when it holds something JSON cannot.
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>>;
    /// As JSON.
    fn to_json(&self) -> Value;
    /// From JSON text the core has validated; `None` when it does not have this shape.
    fn from_text(text: &str) -> Option<Self>;
}

impl Native for Object {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(object_to_py(py, self)?.into_any())
    }
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        if obj.cast::<PyDict>().is_ok() {
            py_to_object(obj).map(Some)
        } else {
            Ok(None)
        }
    }
    fn to_json(&self) -> Value {
        Value::Object(self.clone())
    }
    fn from_text(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// `task.progress`'s payload: the core's [`Payload`], which may still be the validated
/// text of the frame it was decoded from (then built into Python objects straight from
/// that text).
impl Native for Payload {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.text() {
            Some(text) => text_to_py(py, text),
            None => Ok(object_to_py(py, self.object())?.into_any()),
        }
    }
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        Ok(Object::from_py(obj)?.map(Payload::from))
    }
    fn to_json(&self) -> Value {
        Value::Object(self.object().clone())
    }
    fn from_text(text: &str) -> Option<Self> {
        Object::from_text(text).map(Payload::from)
    }
}

impl Native for Vec<String> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(strings_to_py(py, self)?.into_any())
    }
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = obj.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item.cast::<PyString>() {
                Ok(s) => out.push(s.to_cow()?.into_owned()),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(out))
    }
    fn to_json(&self) -> Value {
        Value::from(self.clone())
    }
    fn from_text(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

impl Native for IndexMap<String, u64> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = PyDict::new(py);
        for (k, v) in self {
            d.set_item(k, v)?;
        }
        Ok(d.into_any())
    }
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let Ok(d) = obj.cast::<PyDict>() else {
            return Ok(None);
        };
        let mut out = IndexMap::with_capacity(d.len());
        for (k, v) in d.iter() {
            let (Ok(k), true) = (k.cast::<PyString>(), v.cast::<PyBool>().is_err()) else {
                return Ok(None);
            };
            if v.cast::<PyInt>().is_err() {
                return Ok(None);
            }
            match v.extract::<u64>() {
                Ok(n) => {
                    out.insert(k.to_cow()?.into_owned(), n);
                }
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(out))
    }
    fn to_json(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), Value::from(*v)))
                .collect(),
        )
    }
    fn from_text(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// Result of [`Slot::prepare`].
pub enum Lend<T> {
    /// The field is native: it will be moved out by [`Slot::take`].
    Native,
    /// The Python value, converted.
    Value(T),
    /// The Python value does not have the field's shape.
    Mismatch,
}

impl<T> Lend<T> {
    /// `true` for [`Lend::Mismatch`].
    pub fn is_mismatch(&self) -> bool {
        matches!(self, Lend::Mismatch)
    }
}

/// A container field: native until read from Python, then the Python object.
pub enum Slot<T> {
    /// Not yet handed to Python.
    Native(T),
    /// The Python object that is the field's value.
    Py(Py<PyAny>),
    /// Not yet read: the field's JSON text, validated by the core.
    Text(Text),
}

impl<T: Native> Default for Slot<T> {
    fn default() -> Self {
        Slot::Native(T::default())
    }
}

impl<T: Native> Slot<T> {
    /// The Python object of the field (built and kept on first access).
    pub fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Slot::Py(p) => Ok(p.clone_ref(py)),
            Slot::Native(v) => {
                let obj = v.to_py(py)?.unbind();
                *self = Slot::Py(obj.clone_ref(py));
                Ok(obj)
            }
            Slot::Text(text) => {
                let obj = text_to_py(py, text.as_str())?.unbind();
                *self = Slot::Py(obj.clone_ref(py));
                Ok(obj)
            }
        }
    }

    /// The native value of a [`Slot::Text`] field.
    fn parse(text: &str) -> PyResult<T> {
        T::from_text(text).ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err("a validated field no longer parses")
        })
    }

    /// `true` when the field holds nothing: an empty native value, or an empty `dict`.
    pub fn is_empty(&self, py: Python<'_>) -> bool {
        match self {
            Slot::Native(v) => *v == T::default(),
            Slot::Py(p) => p
                .bind(py)
                .cast_exact::<PyDict>()
                .is_ok_and(|d| d.is_empty()),
            Slot::Text(_) => false,
        }
    }

    /// Replace the field with a Python object.
    pub fn set(&mut self, obj: &Bound<'_, PyAny>) {
        *self = Slot::Py(obj.clone().unbind());
    }

    /// The native value; `Ok(None)` when the Python object has the wrong shape.
    pub fn native(&self, py: Python<'_>) -> PyResult<Option<T>> {
        match self {
            Slot::Native(v) => Ok(Some(v.clone())),
            Slot::Py(p) => T::from_py(p.bind(py)),
            Slot::Text(text) => Self::parse(text.as_str()).map(Some),
        }
    }

    /// Phase one of lending the field to the core without copying: convert a Python
    /// value (which may fail, or not fit: `Lend::Mismatch`); a native value stays put.
    pub fn prepare(&self, py: Python<'_>) -> PyResult<Lend<T>> {
        match self {
            Slot::Native(_) => Ok(Lend::Native),
            Slot::Py(p) => Ok(match T::from_py(p.bind(py))? {
                Some(v) => Lend::Value(v),
                None => Lend::Mismatch,
            }),
            Slot::Text(text) => Self::parse(text.as_str()).map(Lend::Value),
        }
    }

    /// Phase two (infallible): the value to lend — a native value is moved out.
    pub fn take(&mut self, prepared: Lend<T>) -> T {
        match (prepared, self) {
            (Lend::Value(v), _) => v,
            (_, Slot::Native(v)) => std::mem::take(v),
            _ => T::default(),
        }
    }

    /// Take back a lent value: a native field gets it again, and so does a text field
    /// (parsed once, kept native from then on); a Python field keeps its object (the lent
    /// value was a conversion).
    pub fn give_back(&mut self, value: T) {
        match self {
            Slot::Native(v) => *v = value,
            Slot::Text(_) => *self = Slot::Native(value),
            Slot::Py(_) => {}
        }
    }

    /// The field as JSON, whatever its shape.
    ///
    /// # Errors
    /// `TypeError`/`ValueError` for a Python value JSON cannot hold.
    pub fn json(&self, py: Python<'_>) -> PyResult<Value> {
        match self {
            Slot::Native(v) => Ok(v.to_json()),
            Slot::Py(p) => py_to_jvalue(p.bind(py)),
            Slot::Text(text) => Ok(Self::parse(text.as_str())?.to_json()),
        }
    }

    /// Python `repr()` of the field's value.
    pub fn repr(&self, py: Python<'_>) -> PyResult<String> {
        let obj = match self {
            Slot::Native(v) => v.to_py(py)?,
            Slot::Py(p) => p.bind(py).clone(),
            Slot::Text(text) => text_to_py(py, text.as_str())?,
        };
        Ok(obj.repr()?.to_cow()?.into_owned())
    }
}

/// One field of a message class, as the class stores it: a [`Slot`] for a container, the
/// core's own value for a scalar ([`Plain`]). The message classes handle every field
/// through this trait, so each states its fields once.
pub trait Field: Sized {
    /// The field in the core's message.
    type Core;
    /// The constructor argument.
    type Arg<'a>;
    /// The field for a constructor argument.
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self>;
    /// The field of a core message.
    fn from_core(value: Self::Core) -> Self;
    /// The core value (a copy); `Ok(None)` when a Python value has the wrong shape.
    fn native(&self, py: Python<'_>) -> PyResult<Option<Self::Core>>;
    /// Phase one of lending the field to the core (see [`Slot::prepare`]).
    fn prepare(&self, py: Python<'_>) -> PyResult<Lend<Self::Core>>;
    /// Phase two (see [`Slot::take`]).
    fn take(&mut self, prepared: Lend<Self::Core>) -> Self::Core;
    /// Take back a lent value (see [`Slot::give_back`]).
    fn give_back(&mut self, value: Self::Core);
    /// The field as JSON, whatever its shape.
    fn json(&self, py: Python<'_>) -> PyResult<Value>;
    /// Python `repr()` of the field's value.
    fn repr(&self, py: Python<'_>) -> PyResult<String>;
}

impl<T: Native> Field for Slot<T> {
    type Core = T;
    /// Any object (`None` = empty): stored as given, converted when the message is used.
    type Arg<'a> = Option<Py<PyAny>>;
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self> {
        Ok(match arg {
            Some(o) if !o.is_none(py) => Slot::Py(o),
            _ => Slot::default(),
        })
    }
    fn from_core(value: T) -> Self {
        Slot::Native(value)
    }
    fn native(&self, py: Python<'_>) -> PyResult<Option<T>> {
        Slot::native(self, py)
    }
    fn prepare(&self, py: Python<'_>) -> PyResult<Lend<T>> {
        Slot::prepare(self, py)
    }
    fn take(&mut self, prepared: Lend<T>) -> T {
        Slot::take(self, prepared)
    }
    fn give_back(&mut self, value: T) {
        Slot::give_back(self, value)
    }
    fn json(&self, py: Python<'_>) -> PyResult<Value> {
        Slot::json(self, py)
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        Slot::repr(self, py)
    }
}

/// A field with a property of its own (`=> { … }` in `message_class!`).
pub trait Property {
    /// The property's value.
    fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>>;
    /// Set the property.
    fn set(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()>;
}

impl<T: Native> Property for Slot<T> {
    fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Slot::get(self, py)
    }
    fn set(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        Slot::set(self, value);
        Ok(())
    }
}

/// A scalar field: stored as the core holds it and copied to the core.
pub trait Plain: Clone {
    /// The constructor argument.
    type Arg<'a>;
    /// The field for a constructor argument.
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self>;
    /// As JSON.
    fn json(&self) -> Value;
    /// Python `repr()` of the value.
    fn repr(&self, py: Python<'_>) -> PyResult<String>;
}

impl<T: Plain> Field for T {
    type Core = T;
    type Arg<'a> = <T as Plain>::Arg<'a>;
    fn from_arg(py: Python<'_>, arg: Self::Arg<'_>) -> PyResult<Self> {
        <T as Plain>::from_arg(py, arg)
    }
    fn from_core(value: T) -> Self {
        value
    }
    fn native(&self, _py: Python<'_>) -> PyResult<Option<T>> {
        Ok(Some(self.clone()))
    }
    fn prepare(&self, _py: Python<'_>) -> PyResult<Lend<T>> {
        Ok(Lend::Native)
    }
    fn take(&mut self, _prepared: Lend<T>) -> T {
        self.clone()
    }
    fn give_back(&mut self, _value: T) {}
    fn json(&self, _py: Python<'_>) -> PyResult<Value> {
        Ok(Plain::json(self))
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        Plain::repr(self, py)
    }
}

impl Plain for u64 {
    type Arg<'a> = u64;
    fn from_arg(_py: Python<'_>, arg: u64) -> PyResult<Self> {
        Ok(arg)
    }
    fn json(&self) -> Value {
        Value::from(*self)
    }
    fn repr(&self, _py: Python<'_>) -> PyResult<String> {
        Ok(self.to_string())
    }
}

impl Plain for String {
    type Arg<'a> = &'a str;
    fn from_arg(_py: Python<'_>, arg: &str) -> PyResult<Self> {
        Ok(arg.to_owned())
    }
    fn json(&self) -> Value {
        Value::from(self.as_str())
    }
    fn repr(&self, py: Python<'_>) -> PyResult<String> {
        let repr = PyString::new(py, self).repr();
        Ok(repr
            .and_then(|r| r.to_cow().map(|c| c.into_owned()))
            .unwrap_or_else(|_| format!("{self:?}")))
    }
}
