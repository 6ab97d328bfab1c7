//! `decode` as a hand-made vectorcall function.
//!
//! `METH_FASTCALL | METH_KEYWORDS` (no argument tuple or keyword dict per call) with the
//! keyword compared in place, and the frame read through `PyUnicode_AsUTF8AndSize` (a
//! borrowed UTF-8 view, no copy for ASCII text): cheaper than PyO3's generated wrapper
//! for the hottest call of the package. Frames other than `str` go to
//! [`crate::wire::decode`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

/// The `METH_FASTCALL | METH_KEYWORDS` signature.
type FastWithKeywords = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// The function's docstring; its first line is the signature `inspect` reads.
const DOC: &std::ffi::CStr = c"decode($module, frame, *, validate=False)\n--\n\n\
Decode one frame (``str``, ``bytes``, ``bytearray`` or an already-parsed ``dict``) into\n\
its message class; ``validate=True`` checks every schema rule.";

/// `encode`'s docstring.
const ENCODE_DOC: &std::ffi::CStr = c"encode($module, message)\n--\n\n\
Encode a message (or a dict, built with the tolerant rules) as one compact JSON frame:\n\
the core's deterministic, byte-stable encoding.";

/// The vectorcall `decode` function, for `module`.
///
/// # Errors
/// The error of creating the function object.
pub fn decode_function<'py>(module: &Bound<'py, PyModule>) -> PyResult<Bound<'py, PyAny>> {
    function(module, c"decode", DOC, decode_fast)
}

/// The vectorcall `encode` function, for `module`: [`crate::wire::encode`] without
/// PyO3's argument handling.
///
/// # Errors
/// The error of creating the function object.
pub fn encode_function<'py>(module: &Bound<'py, PyModule>) -> PyResult<Bound<'py, PyAny>> {
    function(module, c"encode", ENCODE_DOC, encode_fast)
}

/// A `METH_FASTCALL | METH_KEYWORDS` function of `module`.
fn function<'py>(
    module: &Bound<'py, PyModule>,
    name: &'static std::ffi::CStr,
    doc: &'static std::ffi::CStr,
    fast: FastWithKeywords,
) -> PyResult<Bound<'py, PyAny>> {
    let py = module.py();
    // A function's method table must outlive it; the module is initialised once per
    // process, so this is one small allocation for the process's life.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            // SAFETY: the union holds any function pointer; `ml_flags` tells CPython
            // which signature to call it with, and it is this one.
            PyCFunctionWithKeywords: unsafe {
                std::mem::transmute::<FastWithKeywords, ffi::PyCFunctionWithKeywords>(fast)
            },
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }));
    let name = module.name()?;
    // SAFETY: `def` lives forever; `module` (the function's `__self__`, as for PyO3's
    // functions) and `name` are valid objects; the result is a new reference or NULL
    // with an exception set.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyCFunction_NewEx(def, module.as_ptr(), name.as_ptr()),
        )
    }
}

/// `encode`'s `METH_FASTCALL | METH_KEYWORDS` entry point: one argument, `message`.
unsafe extern "C" fn encode_fast(
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls this with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CPython passes `nargs` positional arguments followed by one per name in
        // `kwnames`, all borrowed for the call.
        let message = unsafe { message_argument(py, args, nargs, kwnames) }?;
        crate::wire::encode(&message).map(Bound::into_any)
    }));
    let result = result.unwrap_or_else(|_| {
        Err(PyRuntimeError::new_err(
            "internal error in encode (a Rust panic); please report it",
        ))
    });
    match result {
        Ok(obj) => obj.into_ptr(),
        Err(e) => {
            e.restore(py);
            ptr::null_mut()
        }
    }
}

/// `encode`'s one argument, positional or the keyword `message`.
unsafe fn message_argument<'py>(
    py: Python<'py>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    let names = if kwnames.is_null() {
        None
    } else {
        // SAFETY: `kwnames` is a tuple of str when not NULL.
        Some(unsafe { Bound::from_borrowed_ptr(py, kwnames) }.cast_into::<PyTuple>()?)
    };
    let nkw = names.as_ref().map_or(0, |n| n.len());
    // SAFETY: `args` has `nargs + nkw` valid borrowed references.
    let arg = |i: usize| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) };
    match (nargs, &names) {
        (1, None) => Ok(arg(0)),
        (0, Some(names)) if nkw == 1 => {
            let name = names.get_item(0)?;
            // SAFETY: `name` is a str from `kwnames`; the comparison sets no error.
            let is_message = unsafe {
                ffi::PyUnicode_CompareWithASCIIString(name.as_ptr(), c"message".as_ptr()) == 0
            };
            if is_message {
                Ok(arg(0))
            } else {
                Err(PyTypeError::new_err(format!(
                    "encode() got an unexpected keyword argument {}",
                    name.repr()?
                )))
            }
        }
        _ if nargs + nkw as ffi::Py_ssize_t == 0 => Err(PyTypeError::new_err(
            "encode() missing 1 required positional argument: 'message'",
        )),
        _ => Err(PyTypeError::new_err(format!(
            "encode() takes 1 argument but {} were given",
            nargs + nkw as ffi::Py_ssize_t
        ))),
    }
}

/// The `METH_FASTCALL | METH_KEYWORDS` entry point.
unsafe extern "C" fn decode_fast(
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls this with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CPython passes `nargs` positional arguments followed by one per name in
        // `kwnames`, all borrowed for the call.
        let (frame, validate) = unsafe { arguments(py, args, nargs, kwnames) }?;
        decode_object(&frame, validate)
    }));
    let result = result.unwrap_or_else(|_| {
        Err(PyRuntimeError::new_err(
            "internal error in decode (a Rust panic); please report it",
        ))
    });
    match result {
        Ok(obj) => obj.into_ptr(),
        Err(e) => {
            e.restore(py);
            ptr::null_mut()
        }
    }
}

/// The keywords `decode` takes.
enum Keyword {
    Frame,
    Validate,
}

/// Which keyword `name` (a `str` from `kwnames`) is, compared without converting it.
fn keyword(name: &Bound<'_, PyAny>) -> Option<Keyword> {
    // Keyword names in calls are interned: the common case is a pointer comparison.
    if name.is(pyo3::intern!(name.py(), "validate")) {
        return Some(Keyword::Validate);
    }
    // SAFETY: `name` is a valid object; the comparison sets no error for a str (the
    // names in `kwnames` always are) and returns -1/0/1.
    let is = |ascii: &std::ffi::CStr| unsafe {
        ffi::PyUnicode_CompareWithASCIIString(name.as_ptr(), ascii.as_ptr()) == 0
    };
    if is(c"validate") {
        Some(Keyword::Validate)
    } else if is(c"frame") {
        Some(Keyword::Frame)
    } else {
        None
    }
}

/// `(frame, validate)` from vectorcall arguments: one positional argument and an optional
/// keyword `validate` (a `bool`).
unsafe fn arguments<'py>(
    py: Python<'py>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<(Bound<'py, PyAny>, bool)> {
    let nkw = if kwnames.is_null() {
        0
    } else {
        // SAFETY: `kwnames` is a tuple of str when not NULL.
        unsafe { Bound::from_borrowed_ptr(py, kwnames) }
            .cast_into::<PyTuple>()?
            .len()
    };
    if nargs > 1 {
        return Err(PyTypeError::new_err(format!(
            "decode() takes 1 positional argument but {nargs} were given"
        )));
    }
    // SAFETY: `args` has `nargs + nkw` valid borrowed references.
    let arg = |i: usize| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) };
    let mut frame = (nargs == 1).then(|| arg(0));
    let mut validate = false;
    if nkw > 0 {
        // SAFETY: checked not NULL above.
        let names = unsafe { Bound::from_borrowed_ptr(py, kwnames) }.cast_into::<PyTuple>()?;
        for (i, name) in names.iter().enumerate() {
            let value = arg(nargs as usize + i);
            match keyword(&name) {
                Some(Keyword::Validate) => {
                    validate = value.extract().map_err(|_| {
                        PyTypeError::new_err(format!(
                            "decode() argument 'validate' must be bool, not {}",
                            crate::json::type_name(&value)
                        ))
                    })?;
                }
                Some(Keyword::Frame) if frame.is_none() => frame = Some(value),
                Some(Keyword::Frame) => {
                    return Err(PyTypeError::new_err(
                        "decode() got multiple values for argument 'frame'",
                    ))
                }
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "decode() got an unexpected keyword argument {}",
                        name.repr()?
                    )))
                }
            }
        }
    }
    let frame = frame.ok_or_else(|| {
        PyTypeError::new_err("decode() missing required argument 'frame' (pos 1)")
    })?;
    Ok((frame, validate))
}

/// Decode a frame object: a `str` through a borrowed UTF-8 view, anything else as the
/// PyO3 function does.
fn decode_object<'py>(frame: &Bound<'py, PyAny>, validate: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = frame.py();
    let Ok(s) = frame.cast::<PyString>() else {
        return crate::wire::decode(frame, validate);
    };
    let mut len: ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a str; the view lives as long as `s` (borrowed for this call) and is
    // valid UTF-8 of `len` bytes; NULL means the str has lone surrogates.
    let text = unsafe {
        let data = ffi::PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut len);
        if data.is_null() {
            drop(PyErr::take(py));
            return Err(crate::wire::not_utf8(py));
        }
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast::<u8>(), len as usize))
    };
    // SAFETY: `text` is the UTF-8 view of the immutable `str` `frame`, which lives as
    // long as the str does.
    unsafe { crate::wire::decode_text(py, text, validate, Some(frame)) }
}
