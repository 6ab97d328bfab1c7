//! Fast Python object construction.
//!
//! The per-version build (no stable ABI) uses what msgspec and orjson use: a compact
//! ASCII `str` created with `PyUnicode_New` and filled with one copy (no UTF-8
//! decoding). The `abi3` build (stable ABI, feature `abi3`) has no `PyUnicode_New`:
//! there every `str` is `PyUnicode_FromStringAndSize`. Both keep a cache of the `str`
//! objects of object keys (the
//! protocol's payloads use a small set of keys over and over: reusing the `str` saves
//! creating it and hashing it again on `dict` insertion). Everything here only builds
//! objects; no protocol rule lives here.

use std::cell::UnsafeCell;
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// A new `str` holding `s`: for ASCII text a compact one-byte `str` filled with one copy,
/// otherwise `PyUnicode_FromStringAndSize`.
#[cfg(not(feature = "abi3"))]
#[inline]
pub fn new_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    // SAFETY: the GIL is held (`py`); `PyUnicode_New(n, 127)` returns a compact ASCII str
    // with room for `n` bytes (plus the NUL it already wrote), which is filled before the
    // object is shared. NULL (out of memory) sets an error that `from_owned_ptr_or_err`
    // turns into a panic-free `PyErr`; then the slower constructor reports it again.
    unsafe {
        let len = s.len() as ffi::Py_ssize_t;
        if s.is_ascii() {
            let obj = ffi::PyUnicode_New(len, 127);
            if !obj.is_null() {
                ptr::copy_nonoverlapping(
                    s.as_ptr(),
                    ffi::PyUnicode_DATA(obj).cast::<u8>(),
                    s.len(),
                );
                return Bound::from_owned_ptr(py, obj).cast_into_unchecked();
            }
            drop(PyErr::take(py));
        }
        PyString::new(py, s)
    }
}

/// A new `str` holding `s` (the stable ABI's constructor, which decodes the UTF-8).
#[cfg(feature = "abi3")]
#[inline]
pub fn new_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    PyString::new(py, s)
}

/// Most keys this module interns itself (see [`interned`]).
const MAX_INTERNED: usize = 4096;

/// How many keys this module has interned itself.
struct Count(UnsafeCell<usize>);
// SAFETY: only touched with the GIL held (see `KeyCache`).
unsafe impl Sync for Count {}
static INTERNED: Count = Count(UnsafeCell::new(0));

/// The interned `str` equal to `s`: the one the interpreter already has (every
/// identifier in the program's code is one, so `payload["detail"]` then finds its key by
/// identity instead of comparing text), or `s` itself interned. Interned strings can be
/// immortal (CPython 3.12+), so the keys this module interns itself are capped at
/// [`MAX_INTERNED`] per process; past that, new keys are cached without interning.
fn interned(s: Bound<'_, PyString>) -> Bound<'_, PyString> {
    // SAFETY: the GIL is held (`s` is bound); `PyUnicode_InternInPlace` takes a strong
    // reference and replaces it with the interned one (releasing the one given).
    let py = s.py();
    unsafe {
        let count = INTERNED.0.get();
        if *count >= MAX_INTERNED {
            return s;
        }
        let given = s.as_ptr();
        let mut p = s.into_ptr();
        ffi::PyUnicode_InternInPlace(&mut p);
        if p == given {
            *count += 1;
        }
        Bound::from_owned_ptr(py, p).cast_into_unchecked()
    }
}

/// A new `str` of ASCII text (the caller knows it is ASCII: checked in debug builds).
#[cfg(feature = "abi3")]
#[inline]
pub fn new_ascii_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    debug_assert!(s.is_ascii());
    PyString::new(py, s)
}

/// A new `str` of ASCII text (the caller knows it is ASCII: checked in debug builds).
#[cfg(not(feature = "abi3"))]
#[inline]
pub fn new_ascii_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    debug_assert!(s.is_ascii());
    // SAFETY: as in `new_str`; `s` is ASCII, so a one-byte ASCII str holds it.
    unsafe {
        let obj = ffi::PyUnicode_New(s.len() as ffi::Py_ssize_t, 127);
        if obj.is_null() {
            drop(PyErr::take(py));
            return PyString::new(py, s);
        }
        ptr::copy_nonoverlapping(s.as_ptr(), ffi::PyUnicode_DATA(obj).cast::<u8>(), s.len());
        Bound::from_owned_ptr(py, obj).cast_into_unchecked()
    }
}

/// Slots of the key cache (a power of two).
const KEY_SLOTS: usize = 512;
/// Longest key the cache holds.
const MAX_CACHED_KEY: usize = 32;

/// A cache slot: the key's bytes and its `str` (a strong reference; NULL when empty).
#[derive(Clone, Copy)]
struct KeySlot {
    len: usize,
    bytes: [u8; MAX_CACHED_KEY],
    obj: *mut ffi::PyObject,
}

const EMPTY_SLOT: KeySlot = KeySlot {
    len: 0,
    bytes: [0; MAX_CACHED_KEY],
    obj: ptr::null_mut(),
};

/// The key cache: direct-mapped by a hash of the key, bounded (`KEY_SLOTS` × at most
/// `MAX_CACHED_KEY` bytes); a colliding key replaces the slot.
struct KeyCache(UnsafeCell<[KeySlot; KEY_SLOTS]>);

// SAFETY: the cache is only touched with the GIL held (every caller has a `Python`
// token), and the module declares that it needs the GIL (`gil_used = true` in
// `lib.rs`), so free-threaded interpreters run it under the GIL as well.
unsafe impl Sync for KeyCache {}

static KEYS: KeyCache = KeyCache(UnsafeCell::new([EMPTY_SLOT; KEY_SLOTS]));

/// The cache of short string values (state names, model names, kinds repeat from frame
/// to frame), separate from the keys so values never evict keys; never interned.
static VALUES: KeyCache = KeyCache(UnsafeCell::new([EMPTY_SLOT; KEY_SLOTS]));

/// An object key as a Python `str`, from the cache when it was seen recently (interned,
/// see [`interned`]).
#[inline]
pub fn key<'py>(py: Python<'py>, key: &str) -> Bound<'py, PyString> {
    cached(py, &KEYS, key, true)
}

/// A short string value as a Python `str`, from the value cache when it was seen
/// recently; longer ones are created.
#[inline]
pub fn value_str<'py>(py: Python<'py>, value: &str) -> Bound<'py, PyString> {
    if value.len() > MAX_CACHED_VALUE {
        return new_str(py, value);
    }
    cached(py, &VALUES, value, false)
}

/// Longest string value the value cache holds.
const MAX_CACHED_VALUE: usize = 32;

#[inline]
fn cached<'py>(py: Python<'py>, cache: &KeyCache, key: &str, intern: bool) -> Bound<'py, PyString> {
    let bytes = key.as_bytes();
    let len = bytes.len();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return new_str(py, key);
    };
    if len > MAX_CACHED_KEY {
        return new_str(py, key);
    }
    // A cheap hash of the length and three bytes; the slot is confirmed by comparison.
    let mid = bytes.get(len / 2).copied().unwrap_or(0);
    let h = (len as u64) | u64::from(first) << 8 | u64::from(mid) << 16 | u64::from(last) << 24;
    let index = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize & (KEY_SLOTS - 1);
    // SAFETY: the GIL is held, so no other thread touches the cache; no reference into it
    // is held across a call that could run Python code (creating a `str` runs none, and
    // the decref of a replaced `str` runs no finaliser).
    unsafe {
        let slot = cache.0.get().cast::<KeySlot>().add(index);
        if (*slot).len == len && short_eq(&(*slot).bytes, bytes) {
            return Bound::from_borrowed_ptr(py, (*slot).obj).cast_into_unchecked();
        }
        let fresh = new_str(py, key);
        let fresh = if intern { interned(fresh) } else { fresh };
        let mut entry = KeySlot {
            len,
            bytes: [0; MAX_CACHED_KEY],
            obj: fresh.clone().into_ptr(),
        };
        if let Some(head) = entry.bytes.get_mut(..len) {
            head.copy_from_slice(bytes);
        }
        let old = std::mem::replace(&mut *slot, entry);
        if !old.obj.is_null() {
            ffi::Py_DECREF(old.obj);
        }
        fresh
    }
}

/// `stored[..b.len()] == b` for `b` at most [`MAX_CACHED_KEY`] bytes long, compared with
/// a few (overlapping) word loads instead of a `memcmp` call.
#[inline(always)]
fn short_eq(stored: &[u8; MAX_CACHED_KEY], b: &[u8]) -> bool {
    let len = b.len();
    let word8 = |s: &[u8], i: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(c) = s.get(i..i.wrapping_add(8)) {
            w.copy_from_slice(c);
        }
        u64::from_le_bytes(w)
    };
    if len >= 8 {
        let mut i = 0;
        while i + 8 < len {
            if word8(stored, i) != word8(b, i) {
                return false;
            }
            i += 8;
        }
        let last = len - 8;
        return word8(stored, last) == word8(b, last);
    }
    if len >= 4 {
        let word4 = |s: &[u8], i: usize| -> u32 {
            let mut w = [0u8; 4];
            if let Some(c) = s.get(i..i.wrapping_add(4)) {
                w.copy_from_slice(c);
            }
            u32::from_le_bytes(w)
        };
        return word4(stored, 0) == word4(b, 0) && word4(stored, len - 4) == word4(b, len - 4);
    }
    stored.get(..len) == Some(b)
}
