//! Conversions between JSON values and Python objects.
//!
//! The core's wire messages carry [`stapel_runner_protocol::json`] values (the `j*` /
//! `object` functions here convert those directly); the other machines speak
//! `serde_json`, converted through the same code (`value_to_py`, `py_to_value`, ...).
//!
//! JSON → Python builds `dict`/`list`/`str`/`int`/`float`/`bool`/`None` directly, without a
//! detour through text. Python → JSON accepts those types (and their subclasses, and
//! tuples as arrays); anything else is a `TypeError`, a non-finite float a `ValueError`,
//! and nesting deeper than [`MAX_DEPTH`] a `ValueError` (this also stops cycles).

use pyo3::exceptions::{PyTypeError, PyValueError};

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number};
use stapel_runner_protocol::json::{walk, CompactString, Object, Sink, Value, WalkError};

/// Deepest nesting accepted when converting Python objects to JSON: the core's limit
/// (`json::MAX_DEPTH`), which also stops reference cycles. The core checks the nesting of
/// a whole frame itself (`wire::try_encode`, `wire::from_object`).
pub const MAX_DEPTH: usize = stapel_runner_protocol::json::MAX_DEPTH;

/// A `serde_json` value as a new Python object.
pub fn value_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    jvalue_to_py(py, &Value::from(v))
}

/// A `serde_json` object as a new Python `dict` (key order kept).
pub fn map_to_py<'py>(
    py: Python<'py>,
    m: &Map<String, serde_json::Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m {
        d.set_item(PyString::new(py, k), value_to_py(py, v)?)?;
    }
    Ok(d)
}

/// A Python object as a `serde_json` value (see [`py_to_jvalue`]).
///
/// # Errors
/// As [`py_to_jvalue`].
pub fn py_to_value(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    py_to_jvalue(obj).map(Into::into)
}

/// A Python `dict` as a `serde_json` object (see [`py_to_object`]).
///
/// # Errors
/// As [`py_to_object`].
pub fn py_to_map(obj: &Bound<'_, PyAny>) -> PyResult<Map<String, serde_json::Value>> {
    py_to_object(obj).map(Into::into)
}

/// A JSON value as a new Python object.
pub fn jvalue_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number_to_py(py, n)?,
        Value::String(s) => crate::pyobj::new_str(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(jvalue_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(m) => object_to_py(py, m)?.into_any(),
    })
}

/// A JSON number as a Python `int` (integers) or `float`.
pub fn number_to_py<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(u) = n.as_u64() {
        Ok(u.into_pyobject(py)?.into_any())
    } else if let Some(i) = n.as_i64() {
        Ok(i.into_pyobject(py)?.into_any())
    } else {
        Ok(PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any())
    }
}

/// A JSON object as a new Python `dict` (key order kept).
pub fn object_to_py<'py>(py: Python<'py>, m: &Object) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m {
        d.set_item(key_to_py(py, k), jvalue_to_py(py, v)?)?;
    }
    Ok(d)
}

/// An object key as a Python `str`, from the cache when it was seen recently.
fn key_to_py<'py>(py: Python<'py>, key: &str) -> Bound<'py, PyString> {
    crate::pyobj::key(py, key)
}

/// A list of strings as a new Python `list`.
pub fn strings_to_py<'py>(py: Python<'py>, items: &[String]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, items)
}

/// A Python object as a JSON value.
///
/// # Errors
/// `TypeError` for objects JSON cannot hold (and non-`str` dict keys), `ValueError` for
/// NaN/infinity and for nesting deeper than [`MAX_DEPTH`].
pub fn py_to_jvalue(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_value(obj, 0)
}

/// A Python `dict` as a JSON object.
///
/// # Errors
/// As [`py_to_jvalue`]; `TypeError` when `obj` is not a dict.
pub fn py_to_object(obj: &Bound<'_, PyAny>) -> PyResult<Object> {
    match obj.cast::<PyDict>() {
        Ok(d) => dict_to_object(d, 0),
        Err(_) => Err(PyTypeError::new_err(format!(
            "expected a dict, got {}",
            type_name(obj)
        ))),
    }
}

/// The Python type name of `obj`, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

fn dict_to_object(d: &Bound<'_, PyDict>, depth: usize) -> PyResult<Object> {
    let py = d.py();
    let dict = d.as_ptr();
    // SAFETY: the GIL is held and `dict` is a dict. The key `PyDict_Next` lends is
    // copied before anything else runs; a value is read in place only when it is an exact
    // built-in scalar (no Python code runs), otherwise it is turned into an owned reference
    // first; and a dict that changes size meanwhile (Python code run by a subclass's
    // conversion) is refused.
    unsafe {
        let size = pyo3::ffi::PyDict_Size(dict);
        let mut m = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut pos: pyo3::ffi::Py_ssize_t = 0;
        let mut key: *mut pyo3::ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut pyo3::ffi::PyObject = std::ptr::null_mut();
        while pyo3::ffi::PyDict_Next(dict, &mut pos, &mut key, &mut value) != 0 {
            let key = match utf8_exact(key) {
                Some(s) => CompactString::new(s),
                None => {
                    let k = Bound::from_borrowed_ptr(py, key);
                    match k.cast::<PyString>() {
                        Ok(s) => CompactString::from(s.to_cow()?),
                        Err(_) => {
                            return Err(PyTypeError::new_err(format!(
                                "JSON object keys must be str, not {}",
                                type_name(&k)
                            )))
                        }
                    }
                }
            };
            let value = match exact_scalar(value) {
                Some(v) => v,
                None => to_value(&Bound::from_borrowed_ptr(py, value), depth + 1)?,
            };
            m.push((key, value));
            if pyo3::ffi::PyDict_Size(dict) != size {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "dictionary changed size during iteration",
                ));
            }
        }
        // A dict's keys are unique; two distinct `str` keys are distinct JSON keys.
        Object::from_unique(m).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// An exact `str`, `int` (within 64 bits), finite `float`, `bool` or `None` as JSON, read
/// without running Python code; `None` for anything else (the caller's general path).
///
/// # Safety
/// The GIL is held and `obj` is a valid object.
#[inline(always)]
unsafe fn exact_scalar(obj: *mut pyo3::ffi::PyObject) -> Option<Value> {
    // SAFETY: the caller's contract; each accessor is used on its exact type.
    unsafe {
        if let Some(s) = utf8_exact(obj) {
            return Some(Value::String(CompactString::new(s)));
        }
        if pyo3::ffi::PyLong_CheckExact(obj) != 0 {
            let mut overflow = 0;
            let v = pyo3::ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
            if overflow == 0 {
                return Some(Value::from(v));
            }
            return None;
        }
        if pyo3::ffi::PyFloat_CheckExact(obj) != 0 {
            // An exact float: the read cannot fail (the limited API has no unchecked
            // accessor).
            #[cfg(not(feature = "abi3"))]
            let v = pyo3::ffi::PyFloat_AS_DOUBLE(obj);
            #[cfg(feature = "abi3")]
            let v = pyo3::ffi::PyFloat_AsDouble(obj);
            return Number::from_f64(v).map(Value::Number);
        }
        if obj == pyo3::ffi::Py_None() {
            return Some(Value::Null);
        }
        if obj == pyo3::ffi::Py_True() {
            return Some(Value::Bool(true));
        }
        if obj == pyo3::ffi::Py_False() {
            return Some(Value::Bool(false));
        }
        None
    }
}

/// The UTF-8 of an exact `str`, borrowed from it; `None` for any other object and for a
/// `str` with lone surrogates (the caller's slower path then reports it).
///
/// # Safety
/// The GIL is held and `obj` is a valid object that outlives the result.
#[inline]
unsafe fn utf8_exact<'a>(obj: *mut pyo3::ffi::PyObject) -> Option<&'a str> {
    // SAFETY: the caller's contract; the view lives as long as the str.
    unsafe {
        if pyo3::ffi::PyUnicode_CheckExact(obj) == 0 {
            return None;
        }
        let mut len: pyo3::ffi::Py_ssize_t = 0;
        let data = pyo3::ffi::PyUnicode_AsUTF8AndSize(obj, &mut len);
        if data.is_null() {
            pyo3::ffi::PyErr_Clear();
            return None;
        }
        Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(
            data.cast::<u8>(),
            usize::try_from(len).ok()?,
        )))
    }
}

fn to_value(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "value nested deeper than {MAX_DEPTH} levels (or a reference cycle)"
        )));
    }
    // SAFETY: the GIL is held and `obj` is valid.
    if let Some(v) = unsafe { exact_scalar(obj.as_ptr()) } {
        return Ok(v);
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        // Beyond 64 bits: carried as a double, as the core does for such literals.
        let f: f64 = obj.extract()?;
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("integer out of range for JSON"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("NaN and infinity are not JSON"));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(CompactString::from(s.to_cow()?)));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Value::Object(dict_to_object(d, depth)?));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        let mut out = Vec::with_capacity(l.len());
        for item in l.iter() {
            out.push(to_value(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(t.len());
        for item in t.iter() {
            out.push(to_value(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    Err(PyTypeError::new_err(format!(
        "object of type {} is not JSON serializable",
        type_name(obj)
    )))
}

/// JSON text the core has validated (`wire::peek_progress`'s payload) as a new Python
/// object, built in one pass over the text by the core's `json::walk` (no intermediate
/// JSON values). Duplicate keys are not looked for: the text was validated.
///
/// # Errors
/// `ValueError` if the text is not JSON (it was validated, so only on a bug), or the
/// error of a failed Python allocation.
pub fn text_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    if let Some(obj) = Direct::build(py, text) {
        return Ok(obj);
    }
    walk_to_py(py, text)
}

/// [`text_to_py`] through the core's `json::walk` (the fallback of [`Direct`]).
fn walk_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    walk(text, &mut ToPy(py)).map_err(|e| match e {
        WalkError::Sink(Raised) => PyErr::fetch(py),
        WalkError::Syntax { message, offset } => {
            PyValueError::new_err(format!("invalid JSON text: {message} at byte {offset}"))
        }
    })
}

/// A Python error is set (the interpreter holds it; [`text_to_py`] fetches it). A
/// zero-sized error keeps the sink's results one pointer wide.
struct Raised;

/// Builds Python objects from `json::walk`'s events.
struct ToPy<'py>(Python<'py>);

impl<'py> ToPy<'py> {
    /// A new reference from a C-API call: the object, or [`Raised`] for NULL.
    #[inline(always)]
    fn own<T>(&self, ptr: *mut pyo3::ffi::PyObject) -> Result<Bound<'py, T>, Raised> {
        if ptr.is_null() {
            return Err(Raised);
        }
        // SAFETY: the GIL is held; `ptr` is a new reference of a `T` (each caller creates
        // one of that type).
        Ok(unsafe { Bound::from_owned_ptr(self.0, ptr).cast_into_unchecked() })
    }
}

impl<'py> Sink for ToPy<'py> {
    type Value = Bound<'py, PyAny>;
    type Object = Bound<'py, PyDict>;
    type Array = Bound<'py, PyList>;
    type Error = Raised;

    fn null(&mut self) -> Result<Self::Value, Raised> {
        Ok(self.0.None().into_bound(self.0))
    }
    fn boolean(&mut self, v: bool) -> Result<Self::Value, Raised> {
        Ok(PyBool::new(self.0, v).to_owned().into_any())
    }
    fn unsigned(&mut self, v: u64) -> Result<Self::Value, Raised> {
        // SAFETY: the GIL is held.
        let ptr = unsafe { pyo3::ffi::PyLong_FromUnsignedLongLong(v) };
        self.own(ptr)
    }
    fn signed(&mut self, v: i64) -> Result<Self::Value, Raised> {
        // SAFETY: the GIL is held.
        let ptr = unsafe { pyo3::ffi::PyLong_FromLongLong(v) };
        self.own(ptr)
    }
    fn float(&mut self, v: f64) -> Result<Self::Value, Raised> {
        // SAFETY: the GIL is held.
        let ptr = unsafe { pyo3::ffi::PyFloat_FromDouble(v) };
        self.own(ptr)
    }
    fn string(&mut self, v: &str) -> Result<Self::Value, Raised> {
        Ok(crate::pyobj::value_str(self.0, v).into_any())
    }
    fn object(&mut self) -> Result<Self::Object, Raised> {
        // SAFETY: the GIL is held.
        let ptr = unsafe { pyo3::ffi::PyDict_New() };
        self.own(ptr)
    }
    fn member(&mut self, o: &mut Self::Object, key: &str, v: Self::Value) -> Result<(), Raised> {
        let key = key_to_py(self.0, key);
        // SAFETY: the GIL is held; `o` is a dict, `key` a str and `v` an object, all
        // valid; `PyDict_SetItem` takes its own references.
        if unsafe { pyo3::ffi::PyDict_SetItem(o.as_ptr(), key.as_ptr(), v.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(Raised)
        }
    }
    fn end_object(&mut self, o: Self::Object) -> Result<Self::Value, Raised> {
        Ok(o.into_any())
    }
    fn array(&mut self) -> Result<Self::Array, Raised> {
        // SAFETY: the GIL is held.
        let ptr = unsafe { pyo3::ffi::PyList_New(0) };
        self.own(ptr)
    }
    fn item(&mut self, a: &mut Self::Array, v: Self::Value) -> Result<(), Raised> {
        // SAFETY: the GIL is held; `a` is a list and `v` an object; the list takes its
        // own reference.
        if unsafe { pyo3::ffi::PyList_Append(a.as_ptr(), v.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(Raised)
        }
    }
    fn end_array(&mut self, a: Self::Array) -> Result<Self::Value, Raised> {
        Ok(a.into_any())
    }
}

/// A direct, single-pass builder of Python objects from JSON text the core has already
/// validated: it maps JSON to objects and checks nothing beyond what it needs to find its
/// way. Whatever it does not expect (and any failed allocation) makes it give up —
/// [`text_to_py`] then builds the value through the core's `json::walk`, which reports
/// what is wrong. The same mapping as [`ToPy`]: integers that fit `u64` (`i64` when
/// negative) as `int`, `-0` and every other number as the nearest `float`, object keys
/// through the key cache, short string values through the value cache.
struct Direct<'a, 'py> {
    py: Python<'py>,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Where strings with escapes are resolved.
    scratch: String,
}

/// A new reference from a C-API call (`None` for NULL: the builder gives up).
#[inline(always)]
fn owned<'py>(py: Python<'py>, ptr: *mut pyo3::ffi::PyObject) -> Option<Bound<'py, PyAny>> {
    // SAFETY: the GIL is held; `ptr` is a new reference or NULL.
    unsafe { Bound::from_owned_ptr_or_opt(py, ptr) }
}

/// Set in a byte of the result for each byte of `x` that is `"` or `\` (the lowest flagged
/// byte is exact).
#[inline(always)]
fn quote_or_backslash(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let q = x ^ (ONES * u64::from(b'"'));
    let b = x ^ (ONES * u64::from(b'\\'));
    ((q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGHS
}

impl<'a, 'py> Direct<'a, 'py> {
    /// The object `text` holds, or `None` when the builder gave up (no Python error left
    /// set).
    fn build(py: Python<'py>, text: &'a str) -> Option<Bound<'py, PyAny>> {
        let mut d = Direct {
            py,
            text,
            bytes: text.as_bytes(),
            pos: 0,
            scratch: String::new(),
        };
        let first = d.ws();
        let mut learn = false;
        if first == b'{' {
            let start = d.pos;
            if let Some(key) = d.first_key() {
                // SAFETY: the shape is used during this build only, which runs no
                // Python code and learns nothing before it ends.
                if let Some(shape) = unsafe { crate::shape::lookup(py, key) } {
                    if let Some(v) = d.shaped(shape, 0) {
                        if d.ws() == 0 && d.pos >= d.bytes.len() {
                            return Some(v);
                        }
                    }
                    drop(PyErr::take(py));
                    d.pos = start;
                }
                learn = crate::shape::missed(py, key);
            }
        }
        let value = d.value(first, 0);
        match value {
            Some(v) if d.ws() == 0 && d.pos >= d.bytes.len() => {
                if learn {
                    crate::shape::learn(py, &v);
                }
                Some(v)
            }
            _ => {
                // A failed allocation left an error set: the fallback starts clean.
                drop(PyErr::take(py));
                None
            }
        }
    }

    /// The raw text of the first key of the object at `pos` (`{` there), when it has
    /// no escapes; the position is left unchanged.
    fn first_key(&self) -> Option<&'a [u8]> {
        let mut i = self.pos.wrapping_add(1);
        while matches!(self.at(i), b' ' | b'\n' | b'\t' | b'\r') {
            i = i.wrapping_add(1);
        }
        if self.at(i) != b'"' {
            return None;
        }
        let start = i.wrapping_add(1);
        let mut end = start;
        loop {
            match self.at(end) {
                b'"' => break,
                b'\\' | 0 => return None,
                _ => end += 1,
            }
            if end - start > crate::shape::MAX_KEY {
                return None;
            }
        }
        self.bytes.get(start..end)
    }

    /// The object at `pos` (`{` there) built through its learned layout: every member's
    /// key text as the shape has it, in its order, and nested objects through their own
    /// layouts; the `dict` is a copy of the shape's template ([`crate::shape::fill`]).
    /// `None` as soon as the text does not follow the shape (what was built is released;
    /// the caller starts again at `pos` the general way).
    fn shaped(&mut self, shape: &crate::shape::Shape, depth: usize) -> Option<Bound<'py, PyAny>> {
        let n = shape.members.len();
        let mut values = [std::ptr::null_mut(); crate::shape::MAX_MEMBERS];
        let mut count = 0;
        let built = self.shaped_members(shape, depth, &mut values, &mut count);
        let values = values.get(..count).unwrap_or(&[]);
        if built.is_none() || count != n {
            for &v in values {
                // SAFETY: the GIL is held; each is a strong reference built here.
                unsafe { pyo3::ffi::Py_DECREF(v) }
            }
            return None;
        }
        // SAFETY: the GIL is held; `values` are strong references, one per member (the
        // call consumes them).
        let d = unsafe { crate::shape::fill(self.py, shape, values) }?;
        // SAFETY: `d` is a new reference.
        Some(unsafe { Bound::from_owned_ptr(self.py, d) })
    }

    fn shaped_members(
        &mut self,
        shape: &crate::shape::Shape,
        depth: usize,
        values: &mut [*mut pyo3::ffi::PyObject; crate::shape::MAX_MEMBERS],
        count: &mut usize,
    ) -> Option<()> {
        let bytes = self.bytes;
        let n = bytes.len();
        let last = shape.members.len().checked_sub(1)?;
        let byte = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let mut i = self.pos.wrapping_add(1);
        for (k, m) in shape.members.iter().enumerate() {
            let p: &[u8] = &m.pattern;
            if i <= n && p.len() <= n - i && same_at(bytes, i, p) {
                i += p.len();
            } else {
                // Not compact: whitespace, the key, whitespace, the colon.
                self.pos = i;
                if self.ws() != b'"' {
                    return None;
                }
                let start = self.pos.wrapping_add(1);
                let end = start.checked_add(m.text.len())?;
                if !same(bytes.get(start..end)?, &m.text) || self.at(end) != b'"' {
                    return None;
                }
                self.pos = end.wrapping_add(1);
                if self.ws() != b':' {
                    return None;
                }
                self.pos = self.pos.wrapping_add(1);
                self.ws();
                i = self.pos;
            }
            let c = byte(i);
            let value = if c.wrapping_sub(b'0') < 10 {
                // A short integer, read here; anything else by the general reader.
                let start = i;
                let mut x: u64 = 0;
                loop {
                    let d = byte(i).wrapping_sub(b'0');
                    if d >= 10 {
                        break;
                    }
                    x = x.wrapping_mul(10).wrapping_add(u64::from(d));
                    i += 1;
                }
                if i - start > 18 || matches!(byte(i), b'.' | b'e' | b'E') {
                    self.pos = start;
                    let v = self.number()?.into_ptr();
                    i = self.pos;
                    v
                } else {
                    // SAFETY: the GIL is held.
                    let v = unsafe { pyo3::ffi::PyLong_FromUnsignedLongLong(x) };
                    if v.is_null() {
                        return None;
                    }
                    v
                }
            } else {
                self.pos = i;
                let v = match (&m.sub, c) {
                    (Some(sub), b'{') => self.shaped(sub, depth.wrapping_add(1))?,
                    _ => self.value(c, depth.wrapping_add(1))?,
                };
                i = self.pos;
                v.into_ptr()
            };
            *values.get_mut(k)? = value;
            *count = k + 1;
            match byte(i) {
                b',' if k < last => i += 1,
                b'}' if k == last => i += 1,
                _ => {
                    self.pos = i;
                    match self.ws() {
                        b',' if k < last => {}
                        b'}' if k == last => {}
                        _ => return None,
                    }
                    i = self.pos.wrapping_add(1);
                }
            }
        }
        self.pos = i;
        Some(())
    }

    #[inline(always)]
    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    /// Skip whitespace; the next byte (`0` at the end).
    #[inline(always)]
    fn ws(&mut self) -> u8 {
        loop {
            let b = self.at(self.pos);
            if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                return b;
            }
            self.pos = self.pos.wrapping_add(1);
        }
    }

    fn value(&mut self, first: u8, depth: usize) -> Option<Bound<'py, PyAny>> {
        match first {
            b'"' => {
                self.pos = self.pos.wrapping_add(1);
                let s = self.string()?;
                let s = s.get(self)?;
                Some(crate::pyobj::value_str(self.py, s).into_any())
            }
            b'{' => self.object(depth),
            b'-' | b'0'..=b'9' => self.number(),
            b'[' => self.array(depth),
            b't' => self
                .word(b"true")
                .map(|()| PyBool::new(self.py, true).to_owned().into_any()),
            b'f' => self
                .word(b"false")
                .map(|()| PyBool::new(self.py, false).to_owned().into_any()),
            b'n' => self
                .word(b"null")
                .map(|()| self.py.None().into_bound(self.py)),
            _ => None,
        }
    }

    /// Skip the literal `word` (`None` when the text has something else).
    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos.checked_add(word.len())?;
        if self.bytes.get(self.pos..end)? != word {
            return None;
        }
        self.pos = end;
        Some(())
    }

    fn object(&mut self, depth: usize) -> Option<Bound<'py, PyAny>> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.pos = self.pos.wrapping_add(1);
        // SAFETY: the GIL is held.
        let dict = owned(self.py, unsafe { pyo3::ffi::PyDict_New() })?;
        let mut b = self.ws();
        if b == b'}' {
            self.pos = self.pos.wrapping_add(1);
            return Some(dict);
        }
        loop {
            if b != b'"' {
                return None;
            }
            self.pos = self.pos.wrapping_add(1);
            let key = self.string()?;
            let key = crate::pyobj::key(self.py, key.get(self)?);
            if self.ws() != b':' {
                return None;
            }
            self.pos = self.pos.wrapping_add(1);
            let first = self.ws();
            let value = self.value(first, depth.wrapping_add(1))?;
            // SAFETY: the GIL is held; `dict` is a dict, `key` a str, `value` an object;
            // `PyDict_SetItem` takes its own references.
            if unsafe { pyo3::ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) }
                != 0
            {
                return None;
            }
            match self.ws() {
                b',' => {
                    self.pos = self.pos.wrapping_add(1);
                    b = self.ws();
                }
                b'}' => {
                    self.pos = self.pos.wrapping_add(1);
                    return Some(dict);
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<Bound<'py, PyAny>> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.pos = self.pos.wrapping_add(1);
        // SAFETY: the GIL is held.
        let list = owned(self.py, unsafe { pyo3::ffi::PyList_New(0) })?;
        let mut b = self.ws();
        if b == b']' {
            self.pos = self.pos.wrapping_add(1);
            return Some(list);
        }
        loop {
            let item = self.value(b, depth.wrapping_add(1))?;
            // SAFETY: the GIL is held; `list` is a list; it takes its own reference.
            if unsafe { pyo3::ffi::PyList_Append(list.as_ptr(), item.as_ptr()) } != 0 {
                return None;
            }
            match self.ws() {
                b',' => {
                    self.pos = self.pos.wrapping_add(1);
                    b = self.ws();
                }
                b']' => {
                    self.pos = self.pos.wrapping_add(1);
                    return Some(list);
                }
                _ => return None,
            }
        }
    }

    fn number(&mut self) -> Option<Bound<'py, PyAny>> {
        let start = self.pos;
        let negative = self.at(start) == b'-';
        if negative {
            self.pos = self.pos.wrapping_add(1);
        }
        let mut magnitude: u64 = 0;
        let mut fits = true;
        while let d @ b'0'..=b'9' = self.at(self.pos) {
            match magnitude
                .checked_mul(10)
                .and_then(|m| m.checked_add(u64::from(d & 0x0f)))
            {
                Some(m) => magnitude = m,
                None => fits = false,
            }
            self.pos = self.pos.wrapping_add(1);
        }
        let mut integer = true;
        while let b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' = self.at(self.pos) {
            integer = false;
            self.pos = self.pos.wrapping_add(1);
        }
        if integer && fits {
            // SAFETY (both calls): the GIL is held.
            if !negative {
                return owned(self.py, unsafe {
                    pyo3::ffi::PyLong_FromUnsignedLongLong(magnitude)
                });
            }
            // `-0` is a float, as the core reads it.
            if magnitude != 0 && magnitude <= 1 << 63 {
                let v = (magnitude as i64).wrapping_neg();
                return owned(self.py, unsafe { pyo3::ffi::PyLong_FromLongLong(v) });
            }
        }
        let v: f64 = self.text.get(start..self.pos)?.parse().ok()?;
        if !v.is_finite() {
            return None;
        }
        // SAFETY: the GIL is held.
        owned(self.py, unsafe { pyo3::ffi::PyFloat_FromDouble(v) })
    }

    /// A string whose opening quote is consumed.
    #[inline(always)]
    fn string(&mut self) -> Option<Piece<'a>> {
        let start = self.pos;
        let mut i = start;
        while let Some(chunk) = self.bytes.get(i..i.wrapping_add(8)) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let m = quote_or_backslash(u64::from_le_bytes(word));
            if m != 0 {
                i = i.wrapping_add((m.trailing_zeros() / 8) as usize);
                break;
            }
            i = i.wrapping_add(8);
        }
        while !matches!(self.at(i), b'"' | b'\\' | 0) {
            i = i.wrapping_add(1);
        }
        if self.at(i) == b'"' {
            self.pos = i.wrapping_add(1);
            return self.text.get(start..i).map(Piece::Text);
        }
        self.escaped(start, i)
    }

    /// The rest of a string with escapes, from its first backslash at `i`.
    #[cold]
    fn escaped(&mut self, start: usize, mut i: usize) -> Option<Piece<'a>> {
        self.scratch.clear();
        self.scratch.push_str(self.text.get(start..i)?);
        loop {
            match self.at(i) {
                b'"' => {
                    self.pos = i.wrapping_add(1);
                    return Some(Piece::Scratch);
                }
                b'\\' => {
                    let c = match self.at(i.wrapping_add(1)) {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let high = self.hex4(i.wrapping_add(2))?;
                            i = i.wrapping_add(6);
                            let code = if (0xD800..0xDC00).contains(&high) {
                                if self.at(i) != b'\\' || self.at(i.wrapping_add(1)) != b'u' {
                                    return None;
                                }
                                let low = self.hex4(i.wrapping_add(2))?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return None;
                                }
                                i = i.wrapping_add(6);
                                0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                high
                            };
                            self.scratch.push(char::from_u32(code)?);
                            continue;
                        }
                        _ => return None,
                    };
                    self.scratch.push(c);
                    i = i.wrapping_add(2);
                }
                0 => return None,
                _ => {
                    let run = i;
                    while !matches!(self.at(i), b'"' | b'\\' | 0) {
                        i = i.wrapping_add(1);
                    }
                    self.scratch.push_str(self.text.get(run..i)?);
                }
            }
        }
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        let digits = self.bytes.get(i..i.checked_add(4)?)?;
        digits.iter().try_fold(0u32, |acc, &b| {
            Some((acc << 4) | char::from(b).to_digit(16)?)
        })
    }
}

/// `bytes[i..i + p.len()] == p` (the caller checked that the range is inside `bytes`),
/// compared with (overlapping) unaligned word loads.
#[inline(always)]
fn same_at(bytes: &[u8], i: usize, p: &[u8]) -> bool {
    let len = p.len();
    debug_assert!(i + len <= bytes.len());
    // SAFETY: `i + len <= bytes.len()` (the caller's check), so every load below reads
    // inside both slices: words only where `len >= 8` (at offsets `0..=len - 8`),
    // half-words where `len >= 4`.
    unsafe {
        let a = bytes.as_ptr().add(i);
        let b = p.as_ptr();
        let w = |x: *const u8, o: usize| std::ptr::read_unaligned(x.add(o).cast::<u64>());
        let h = |x: *const u8, o: usize| std::ptr::read_unaligned(x.add(o).cast::<u32>());
        if len >= 8 {
            let mut o = 0;
            while o + 8 < len {
                if w(a, o) != w(b, o) {
                    return false;
                }
                o += 8;
            }
            return w(a, len - 8) == w(b, len - 8);
        }
        if len >= 4 {
            return h(a, 0) == h(b, 0) && h(a, len - 4) == h(b, len - 4);
        }
        (0..len).all(|o| *a.add(o) == *b.add(o))
    }
}

/// `a == b` for short byte strings (keys, at most a few dozen bytes), compared with
/// (overlapping) word loads instead of a `memcmp` call.
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(c) = s.get(i..i.wrapping_add(8)) {
            w.copy_from_slice(c);
        }
        u64::from_le_bytes(w)
    };
    if len < 8 {
        return a == b;
    }
    let mut i = 0;
    while i + 8 < len {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, len - 8) == word(b, len - 8)
}

/// A string [`Direct`] read: a span of the text, or resolved into its scratch buffer.
enum Piece<'a> {
    Text(&'a str),
    Scratch,
}

impl<'a> Piece<'a> {
    #[inline(always)]
    fn get<'s>(&'s self, d: &'s Direct<'a, '_>) -> Option<&'s str> {
        Some(match self {
            Piece::Text(s) => s,
            Piece::Scratch => &d.scratch,
        })
    }
}
