//! Storage of container fields of the message classes.
//!
//! A decoded message keeps its containers (`task`, `payload`, `extra`, …) as Rust values
//! and builds the Python object only when the attribute is first read; from then on the
//! Python object is the field (so `msg.extra["k"] = v` is seen by `encode`). Values set
//! from Python are stored as given, like a dataclass field, and converted when the
//! message is encoded or validated.

use indexmap::IndexMap;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use stapel_runner_protocol::json::{Object, Value};

use crate::json::{object_to_py, py_to_jvalue, py_to_object, strings_to_py};

/// A container type a field can hold natively.
pub trait Native: Sized + Default + Clone + PartialEq {
    /// As a new Python object.
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
    /// From a Python object: `Ok(None)` when the object has the wrong shape (the core
    /// then reports the violation), `Err` when it holds something JSON cannot.
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Self>>;
    /// As JSON.
    fn to_json(&self) -> Value;
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
}

impl<T: Native> Default for Slot<T> {
    fn default() -> Self {
        Slot::Native(T::default())
    }
}

impl<T: Native> Slot<T> {
    /// A slot for a constructor argument (`None` = empty).
    pub fn arg(obj: Option<&Bound<'_, PyAny>>) -> Self {
        match obj {
            Some(o) if !o.is_none() => Slot::Py(o.clone().unbind()),
            _ => Slot::default(),
        }
    }

    /// The Python object of the field (built and kept on first access).
    pub fn get(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Slot::Py(p) => Ok(p.clone_ref(py)),
            Slot::Native(v) => {
                let obj = v.to_py(py)?.unbind();
                *self = Slot::Py(obj.clone_ref(py));
                Ok(obj)
            }
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

    /// Take back a lent value: a native field gets it again; a Python field keeps its
    /// object (the lent value was a conversion).
    pub fn give_back(&mut self, value: T) {
        if let Slot::Native(v) = self {
            *v = value;
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
        }
    }

    /// Python `repr()` of the field's value.
    pub fn repr(&self, py: Python<'_>) -> PyResult<String> {
        let obj = match self {
            Slot::Native(v) => v.to_py(py)?,
            Slot::Py(p) => p.bind(py).clone(),
        };
        Ok(obj.repr()?.to_cow()?.into_owned())
    }
}
