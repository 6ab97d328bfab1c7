//! Learned object layouts ("shapes") for the payload builder ([`crate::json`]'s
//! `Direct`), and building a `dict` of a known layout by copying a template.
//!
//! A firehose of `task.progress` frames repeats a few payload layouts (`{"usage": {five
//! counts}, "model", "turn"}`, `{"state", "detail"}`): the same keys in the same order.
//! For a layout seen before, the builder checks each key's text against the shape
//! (a byte comparison instead of a key-cache lookup) and builds the `dict` by
//! `PyDict_Copy` of the shape's template (its keys, in order, with `None` values; one
//! allocation and a copy of the key table) and writing each value into its entry —
//! rather than inserting key by key, which hashes, probes and appends for every key.
//!
//! Writing an entry uses CPython's `dict` layout (`PyDictKeysObject` and its unicode
//! entries), which is not public API but has been the same in every supported version
//! (3.11–3.13, GIL builds; `Include/internal/pycore_dict.h`). Only the per-version build
//! has it: the `abi3` build (feature `abi3`, stable ABI) compiles the copy path out and
//! always inserts key by key. In the per-version build the copy path switches itself on
//! only at run time and only on an interpreter it was written and tested for: CPython
//! 3.11, 3.12 or 3.13 (the running version, not the one built for), a GIL build, whose
//! `dict` objects have the size of the `PyDictObject` this module was compiled against.
//! Each write is guarded as well: the copy must be a combined table of unicode keys with
//! exactly the template's entries, and each entry must hold the template's key object
//! where it is expected. Anything else — an interpreter whose layout differs — turns the
//! copy path off for the process ([`fill`] then returns `None`, and the builder inserts
//! key by key as before). Only a fresh `dict` nobody else has seen is written this way,
//! and its values are set before it is handed out.
//!
//! Shapes are bounded ([`SLOTS`] root layouts, [`MAX_MEMBERS`] members, [`MAX_KEY`]
//! bytes per key, nested layouts [`MAX_NESTING`] deep), learned on the second miss of a
//! slot, and never change a result: a text that does not follow its shape exactly is
//! built the general way.

use std::cell::UnsafeCell;
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;

/// Root layouts kept (direct-mapped by the first key).
pub const SLOTS: usize = 32;
/// Most members of a shaped object.
pub const MAX_MEMBERS: usize = 12;
/// Longest key of a shaped object.
pub const MAX_KEY: usize = 32;
/// Deepest nesting of shaped objects below a root layout.
pub const MAX_NESTING: usize = 2;

/// One member of a shape: its key's JSON text (without quotes; no escapes), the key
/// object, and the layout of its value when that was an object.
pub struct Member {
    /// The key's bytes as they appear between the quotes.
    pub text: Box<[u8]>,
    /// The member's compact text up to its value: `"key":`.
    pub pattern: Box<[u8]>,
    /// The interned key `str` (the template's).
    pub key: *mut ffi::PyObject,
    /// The value's layout when it was an object last time.
    pub sub: Option<Box<Shape>>,
}

/// A learned object layout.
pub struct Shape {
    /// The members, in order.
    pub members: Vec<Member>,
    /// A `dict` of the members' keys, in order, every value `None` (a strong reference).
    template: *mut ffi::PyObject,
}

impl Drop for Shape {
    fn drop(&mut self) {
        // SAFETY: shapes are created and dropped with the GIL held (the cache's
        // contract); `template` is a strong reference this shape owns. Dropping it runs
        // no Python code (a dict of `str` keys and `None` values).
        unsafe { ffi::Py_DECREF(self.template) }
    }
}

struct Slot {
    shape: Option<Box<Shape>>,
    misses: u8,
}

/// The root layouts, each behind its own cell.
struct Shapes(UnsafeCell<[Slot; SLOTS]>);

// SAFETY: only touched with the GIL held (every caller holds a `Python` token; the
// module declares `gil_used = true`), and no reference into it is kept across a call
// that could run Python code.
unsafe impl Sync for Shapes {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    shape: None,
    misses: 0,
};

static SHAPES: Shapes = Shapes(UnsafeCell::new([EMPTY; SLOTS]));

/// Whether the copy path may write entries: 0 not decided yet, 1 on, 2 off (for good:
/// an interpreter outside 3.11–3.13 or a free-threaded build, or a guard failed).
#[cfg(not(feature = "abi3"))]
struct Enabled(UnsafeCell<u8>);
// SAFETY: as `Shapes`.
#[cfg(not(feature = "abi3"))]
unsafe impl Sync for Enabled {}
#[cfg(not(feature = "abi3"))]
static ENABLED: Enabled = Enabled(UnsafeCell::new(0));

/// The versions whose `dict` layout [`fill`] writes (and the tests run on): 3.11–3.13.
#[cfg(not(feature = "abi3"))]
const TESTED: std::ops::Range<(u8, u8)> = (3, 11)..(3, 14);

#[cfg(not(feature = "abi3"))]
fn enabled(py: Python<'_>) -> bool {
    // SAFETY: the GIL is held (`py`).
    let state = unsafe { &mut *ENABLED.0.get() };
    if *state == 0 {
        *state = if layout_is_known(py) { 1 } else { 2 };
    }
    *state == 1
}

/// The stable-ABI build never writes CPython's private layouts.
#[cfg(feature = "abi3")]
fn enabled(_py: Python<'_>) -> bool {
    false
}

/// Whether the running interpreter is one whose `dict` layout [`fill`] knows.
#[cfg(not(feature = "abi3"))]
fn layout_is_known(py: Python<'_>) -> bool {
    let v = py.version_info();
    // A free-threaded build's object header is larger than the 16 bytes of a GIL build's
    // (and its dicts lock); such an interpreter would not load this build, but say so.
    let gil_build = std::mem::size_of::<ffi::PyObject>() == 16;
    // SAFETY: `PyDict_Type` is a static type object of the running interpreter; reading
    // its size field reads no Python state.
    let dict_size = unsafe { (*std::ptr::addr_of!(ffi::PyDict_Type)).tp_basicsize };
    gil_build
        && TESTED.contains(&(v.major, v.minor))
        && usize::try_from(dict_size).ok() == Some(std::mem::size_of::<ffi::PyDictObject>())
}

#[cfg(not(feature = "abi3"))]
fn disable() {
    // SAFETY: the GIL is held (the callers').
    unsafe { *ENABLED.0.get() = 2 }
}

fn slot_index(first_key: &[u8]) -> usize {
    let len = first_key.len();
    let first = first_key.first().copied().unwrap_or(0);
    let last = first_key.last().copied().unwrap_or(0);
    let h = (len as u64) | u64::from(first) << 8 | u64::from(last) << 16;
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize & (SLOTS - 1)
}

/// The root layout whose first key is `first_key`, if one is kept.
///
/// # Safety
/// The GIL is held; the reference is used only until the next call of [`learn`] or
/// [`missed`] (the builder uses it during one build, which runs no Python code).
pub unsafe fn lookup<'a>(py: Python<'_>, first_key: &[u8]) -> Option<&'a Shape> {
    if !enabled(py) {
        return None;
    }
    // SAFETY: the caller's contract.
    let slot = unsafe { &*SHAPES.0.get().cast::<Slot>().add(slot_index(first_key)) };
    let shape = slot.shape.as_deref()?;
    let m = shape.members.first()?;
    (*m.text == *first_key).then_some(shape)
}

/// Record that a root object with first key `first_key` had no kept layout (or did not
/// follow it); `true` when its layout should be learned now (the slot's second miss).
pub fn missed(py: Python<'_>, first_key: &[u8]) -> bool {
    if !enabled(py) {
        return false;
    }
    // SAFETY: the GIL is held (`py`); no reference into the slot is outstanding.
    let slot = unsafe { &mut *SHAPES.0.get().cast::<Slot>().add(slot_index(first_key)) };
    slot.misses = slot.misses.saturating_add(1);
    slot.misses >= 2
}

/// Learn the layout of `dict` (just built from JSON text) as the root layout of its
/// first key. Nothing is learned for a `dict` the copy path cannot build (too many
/// members, keys too long or not plain, a non-`str` key).
pub fn learn(py: Python<'_>, dict: &Bound<'_, PyAny>) {
    let Some(shape) = shape_of(py, dict.as_ptr(), 0) else {
        return;
    };
    let Some(first) = shape.members.first() else {
        return;
    };
    let index = slot_index(&first.text);
    // SAFETY: the GIL is held; no reference into the slot is outstanding. Dropping the
    // old shape runs no Python code.
    let slot = unsafe { &mut *SHAPES.0.get().cast::<Slot>().add(index) };
    slot.shape = Some(Box::new(shape));
    slot.misses = 0;
}

/// The layout of the exact `dict` `obj` (`depth` levels below the root).
fn shape_of(py: Python<'_>, obj: *mut ffi::PyObject, depth: usize) -> Option<Shape> {
    // SAFETY: the GIL is held; `obj` is a valid object. The dict is only read
    // (`PyDict_Next` lends its keys and values; nothing runs Python code meanwhile).
    unsafe {
        if ffi::PyDict_CheckExact(obj) == 0 {
            return None;
        }
        let n = ffi::PyDict_Size(obj);
        if n < 1 || n as usize > MAX_MEMBERS {
            return None;
        }
        let mut members = Vec::with_capacity(n as usize);
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = ptr::null_mut();
        let mut value: *mut ffi::PyObject = ptr::null_mut();
        while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
            if ffi::PyUnicode_CheckExact(key) == 0 {
                return None;
            }
            let mut len: ffi::Py_ssize_t = 0;
            let data = ffi::PyUnicode_AsUTF8AndSize(key, &mut len);
            if data.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            let text = std::slice::from_raw_parts(data.cast::<u8>(), len as usize);
            // A key that needs escaping never appears as its raw bytes in the text.
            if text.is_empty()
                || text.len() > MAX_KEY
                || text.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20)
            {
                return None;
            }
            let sub = if depth < MAX_NESTING && ffi::PyDict_CheckExact(value) != 0 {
                shape_of(py, value, depth + 1).map(Box::new)
            } else {
                None
            };
            let mut pattern = Vec::with_capacity(text.len() + 3);
            pattern.push(b'"');
            pattern.extend_from_slice(text);
            pattern.extend_from_slice(b"\":");
            members.push(Member {
                text: text.into(),
                pattern: pattern.into(),
                key,
                sub,
            });
        }
        let template = ffi::PyDict_New();
        if template.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        for m in &mut members {
            if ffi::PyDict_SetItem(template, m.key, ffi::Py_None()) != 0 {
                ffi::PyErr_Clear();
                ffi::Py_DECREF(template);
                return None;
            }
        }
        // The template's own key objects (the same ones: it holds them now).
        let shape = Shape { members, template };
        if !copies_cleanly(py, &shape) {
            return None;
        }
        Some(shape)
    }
}

/// Check, once per learned shape, that a copy of its template has the layout [`fill`]
/// writes into; a failure turns the copy path off for the process.
fn copies_cleanly(py: Python<'_>, shape: &Shape) -> bool {
    // SAFETY: the GIL is held (the callers'); `fill`'s own guards.
    unsafe {
        let none: Vec<*mut ffi::PyObject> = shape
            .members
            .iter()
            .map(|_| {
                ffi::Py_INCREF(ffi::Py_None());
                ffi::Py_None()
            })
            .collect();
        match fill(py, shape, &none) {
            Some(d) => {
                let ok = ffi::PyDict_Size(d) == shape.members.len() as ffi::Py_ssize_t;
                ffi::Py_DECREF(d);
                ok
            }
            None => false,
        }
    }
}

/// `PyDictKeysObject` (CPython 3.11–3.13, GIL builds): the fields [`fill`] reads.
#[cfg(not(feature = "abi3"))]
#[repr(C)]
struct DictKeys {
    dk_refcnt: ffi::Py_ssize_t,
    dk_log2_size: u8,
    dk_log2_index_bytes: u8,
    dk_kind: u8,
    dk_version: u32,
    dk_usable: ffi::Py_ssize_t,
    dk_nentries: ffi::Py_ssize_t,
    // dk_indices follow (1 << dk_log2_index_bytes bytes), then the entries.
}

/// `DICT_KEYS_UNICODE`: entries are `{me_key, me_value}`.
#[cfg(not(feature = "abi3"))]
const DICT_KEYS_UNICODE: u8 = 1;

/// A new `dict` of `shape`'s keys, in order, holding `values` (one per member; every
/// reference is consumed, also on failure). `None` when the copy path is off or a guard
/// failed (then the values were released and nothing is left set).
///
/// # Safety
/// The GIL is held; `values` are valid strong references, as many as `shape` has members.
#[cfg(feature = "abi3")]
pub unsafe fn fill(
    _py: Python<'_>,
    _shape: &Shape,
    values: &[*mut ffi::PyObject],
) -> Option<*mut ffi::PyObject> {
    for &v in values {
        // SAFETY: the caller's contract: each is a strong reference we own.
        unsafe { ffi::Py_DECREF(v) }
    }
    None
}

/// A new `dict` of `shape`'s keys, in order, holding `values` (see the `abi3` variant).
///
/// # Safety
/// The GIL is held; `values` are valid strong references, as many as `shape` has members.
#[cfg(not(feature = "abi3"))]
pub unsafe fn fill(
    py: Python<'_>,
    shape: &Shape,
    values: &[*mut ffi::PyObject],
) -> Option<*mut ffi::PyObject> {
    let release = |values: &[*mut ffi::PyObject]| {
        for &v in values {
            // SAFETY: the caller's contract: each is a strong reference we own.
            unsafe { ffi::Py_DECREF(v) }
        }
    };
    if !enabled(py) || values.len() != shape.members.len() {
        release(values);
        return None;
    }
    // SAFETY: the GIL is held. `PyDict_Copy` of the template (a combined table of unicode
    // keys, no deletions) clones its key table: the copy's entries are the template's,
    // in order. The guards below check that before anything is written; each write
    // replaces the `None` the clone holds (a strong reference it took) with a value whose
    // reference is consumed.
    unsafe {
        let d = ffi::PyDict_Copy(shape.template);
        if d.is_null() {
            ffi::PyErr_Clear();
            release(values);
            return None;
        }
        let mp = d.cast::<ffi::PyDictObject>();
        let keys = (*mp).ma_keys.cast::<DictKeys>();
        let n = values.len() as ffi::Py_ssize_t;
        let ok = (*mp).ma_values.is_null()
            && (*mp).ma_used == n
            && !keys.is_null()
            && (*keys).dk_kind == DICT_KEYS_UNICODE
            && (*keys).dk_nentries == n
            && (*keys).dk_usable >= 0
            && (*keys).dk_log2_index_bytes < 32;
        if !ok {
            disable();
            ffi::Py_DECREF(d);
            release(values);
            return None;
        }
        let entries = keys
            .cast::<u8>()
            .add(std::mem::size_of::<DictKeys>() + (1usize << (*keys).dk_log2_index_bytes))
            .cast::<[*mut ffi::PyObject; 2]>();
        for (i, m) in shape.members.iter().enumerate() {
            if (*entries.add(i))[0] != m.key || (*entries.add(i))[1] != ffi::Py_None() {
                disable();
                ffi::Py_DECREF(d);
                release(values);
                return None;
            }
        }
        let mut track = false;
        for (i, &v) in values.iter().enumerate() {
            let e = &mut *entries.add(i);
            e[1] = v;
            ffi::Py_DECREF(ffi::Py_None());
            // CPython's rule for a dict of atoms: it is tracked by the cycle collector
            // once it holds a value that may be (`MAINTAIN_TRACKING`). The builder makes
            // `str`, `int`, `float`, `bool`, `None`, `list` and `dict` values only: the
            // last two are collected types, the others are not.
            track |= ffi::PyType_HasFeature(ffi::Py_TYPE(v), ffi::Py_TPFLAGS_HAVE_GC) != 0;
        }
        if track && ffi::PyObject_GC_IsTracked(d) == 0 {
            ffi::PyObject_GC_Track(d.cast());
        }
        Some(d)
    }
}

/// Drop every learned layout (tests: the copy path starts from nothing).
#[pyfunction]
#[pyo3(name = "_payload_shapes_reset")]
pub fn clear(_py: Python<'_>) {
    // SAFETY: the GIL is held; no reference into the cache is outstanding.
    unsafe {
        let slots = &mut *SHAPES.0.get();
        for s in slots.iter_mut() {
            s.shape = None;
            s.misses = 0;
        }
    }
}

/// Whether the copy path is on (tests).
#[pyfunction]
#[pyo3(name = "_payload_copy_enabled")]
pub fn is_enabled(py: Python<'_>) -> bool {
    enabled(py)
}
