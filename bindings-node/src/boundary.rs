//! The boundary of the hot paths, where N-API's per-value costs dominate.
//!
//! * [`Text`]: a JS string argument copied as UTF-8 into this thread's reusable buffer
//!   with a single N-API call (napi-rs's `String` asks for the length first, then
//!   allocates and copies: two passes over the string and an allocation per call).
//! * [`Frames`]: a JS array of strings, each copied the same way into an owned `String`
//!   (the session machines take frames by value).
//! * The scratch: one `Float64Array` per thread (per Node environment) that the native
//!   code writes numbers into and the TypeScript layer reads after the call returns, so
//!   the fast paths hand back seqs and offsets without creating a single JS value.
//!
//! This module is the crate's only `unsafe` code: the raw N-API calls and the writes
//! into the scratch's memory, each bounds-checked and documented at its use.
//!
//! In the WebAssembly build (the browser, through emnapi) an `ArrayBuffer`'s memory is
//! not the wasm memory the native code writes: emnapi hands out a copy inside the wasm
//! memory. There an [`Out`] copies the numbers it wrote into the JS array when it is
//! dropped, before the export returns (`emnapi_sync_memory`), and the scratch keeps
//! its environment instead of registering a cleanup hook (the page's one environment
//! lives as long as the module).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::{
    Env, FromNapiValue, ToNapiValue, TypeName, ValidateNapiValue, ValueType,
};
use napi::{sys, Error, Result, Status};
use napi_derive::napi;

/// Bytes the per-thread text buffer starts with (a frame of the session's default line
/// bound fits).
const TEXT_CAPACITY: usize = 64 * 1024;
/// A buffer grown beyond this for one large string is released again on the next call.
const TEXT_KEEP: usize = 1024 * 1024;

thread_local! {
    /// The reusable UTF-8 buffer of [`Text`] arguments and the generation of its content.
    static TEXT: RefCell<(Vec<u8>, u64)> = const { RefCell::new((Vec::new(), 0)) };
    /// The scratch's memory (pointer, length in `f64`s) and the reference that keeps its
    /// `ArrayBuffer` alive; null before [`scratch`] ran in this thread's environment.
    static SCRATCH: Cell<(*mut f64, usize, sys::napi_ref)> =
        const { Cell::new((ptr::null_mut(), 0, ptr::null_mut())) };
}

#[cfg(target_family = "wasm")]
thread_local! {
    /// The environment the scratch was made in (WebAssembly: [`Out`] syncs through it).
    static SCRATCH_ENV: Cell<sys::napi_env> = const { Cell::new(ptr::null_mut()) };
}

#[cfg(target_family = "wasm")]
extern "C" {
    /// emnapi: copy `length` bytes from `byte_offset` between the wasm-side memory of an
    /// `ArrayBuffer` and the `ArrayBuffer` itself (`js_to_wasm` false: wasm to JS).
    fn emnapi_sync_memory(
        env: sys::napi_env,
        js_to_wasm: bool,
        arraybuffer_or_view: *mut sys::napi_value,
        byte_offset: usize,
        length: usize,
    ) -> sys::napi_status;
}

/// Length of the scratch in `f64`s.
pub const SCRATCH_LEN: usize = 16 * 1024;

fn status(s: sys::napi_status, what: &str) -> Result<()> {
    if s == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::from(s), format!("{what} failed")))
    }
}

/// Copy the JS string `value` as UTF-8 into `buf` (grown as needed); the byte length.
///
/// # Safety
/// `env` and `value` come from N-API for the current call.
unsafe fn copy_utf8(
    env: sys::napi_env,
    value: sys::napi_value,
    buf: &mut Vec<u8>,
) -> Result<usize> {
    if buf.len() > TEXT_KEEP || buf.len() < TEXT_CAPACITY {
        *buf = vec![0u8; TEXT_CAPACITY];
    }
    let mut written = 0usize;
    // SAFETY: `buf` is a writable allocation of `buf.len()` bytes; N-API writes at most
    // `buf.len() - 1` bytes and a NUL, and reports how many bytes it wrote before the NUL.
    status(
        unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut written,
            )
        },
        "reading a string argument",
    )?;
    // N-API stops at a character boundary when the buffer is too small, so a string that
    // filled all but the last four bytes may have been cut: ask for its length.
    if written.saturating_add(4) >= buf.len() {
        let mut needed = 0usize;
        // SAFETY: a null buffer asks for the UTF-8 length only.
        status(
            unsafe { sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut needed) },
            "measuring a string argument",
        )?;
        if needed >= written.saturating_add(4) || needed.saturating_add(1) > buf.len() {
            *buf = vec![0u8; needed.saturating_add(1)];
            // SAFETY: as above, with room for every byte and the NUL.
            status(
                unsafe {
                    sys::napi_get_value_string_utf8(
                        env,
                        value,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        &mut written,
                    )
                },
                "reading a string argument",
            )?;
        }
    }
    Ok(written.min(buf.len()))
}

/// A JS string argument, held as UTF-8 in this thread's reusable buffer until the next
/// [`Text`] argument is read (one per export; [`Text::with`] refuses a stale one).
///
/// N-API writes a lone surrogate as U+FFFD: the TypeScript layer refuses strings that
/// are not well-formed before they get here, so the text is exactly the JS string.
pub struct Text {
    len: usize,
    generation: u64,
}

impl Text {
    /// Run `f` over the text.
    pub fn with<R>(&self, f: impl FnOnce(&str) -> R) -> Result<R> {
        TEXT.with(|cell| {
            let held = cell
                .try_borrow()
                .map_err(|_| Error::from_reason("the text buffer is in use"))?;
            if held.1 != self.generation {
                return Err(Error::from_reason("a stale text argument"));
            }
            let bytes = held.0.get(..self.len).unwrap_or_default();
            let text = std::str::from_utf8(bytes).map_err(|e| Error::from_reason(e.to_string()))?;
            Ok(f(text))
        })
    }

    /// The text as an owned `String`.
    pub fn to_owned_string(&self) -> Result<String> {
        self.with(str::to_owned)
    }
}

impl TypeName for Text {
    fn type_name() -> &'static str {
        "String"
    }
    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl ValidateNapiValue for Text {}

impl FromNapiValue for Text {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        TEXT.with(|cell| {
            let mut held = cell
                .try_borrow_mut()
                .map_err(|_| Error::from_reason("the text buffer is in use"))?;
            // SAFETY: called by napi-rs with the current call's `env` and argument.
            let len = unsafe { copy_utf8(env, value, &mut held.0) }?;
            held.1 = held.1.wrapping_add(1);
            Ok(Text {
                len,
                generation: held.1,
            })
        })
    }
}

/// A JS array of strings (frames), each copied into an owned `String`.
pub struct Frames(pub Vec<String>);

impl TypeName for Frames {
    fn type_name() -> &'static str {
        "Array<string>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for Frames {}

impl FromNapiValue for Frames {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut n = 0u32;
        // SAFETY: N-API checks that `value` is an array.
        status(
            unsafe { sys::napi_get_array_length(env, value, &mut n) },
            "reading an array",
        )?;
        TEXT.with(|cell| {
            let mut held = cell
                .try_borrow_mut()
                .map_err(|_| Error::from_reason("the text buffer is in use"))?;
            held.1 = held.1.wrapping_add(1);
            let mut out = Vec::with_capacity(n as usize);
            for i in 0..n {
                let mut item = ptr::null_mut();
                // SAFETY: `i` is below the array's length.
                status(
                    unsafe { sys::napi_get_element(env, value, i, &mut item) },
                    "reading an array",
                )?;
                // SAFETY: `item` is the element just read.
                let len = unsafe { copy_utf8(env, item, &mut held.0) }?;
                let bytes = held.0.get(..len).unwrap_or_default();
                out.push(
                    String::from_utf8(bytes.to_vec())
                        .map_err(|e| Error::from_reason(e.to_string()))?,
                );
            }
            Ok(Frames(out))
        })
    }
}

/// A JS value made by N-API directly (the scratch array).
pub struct RawValue(sys::napi_value);

impl ToNapiValue for RawValue {
    unsafe fn to_napi_value(_env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        Ok(value.0)
    }
}

impl TypeName for RawValue {
    fn type_name() -> &'static str {
        "Float64Array"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

#[cfg(not(target_family = "wasm"))]
unsafe extern "C" fn forget_scratch(_arg: *mut c_void) {
    SCRATCH.with(|s| s.set((ptr::null_mut(), 0, ptr::null_mut())));
}

/// The scratch `Float64Array` of this thread's environment ([`SCRATCH_LEN`] numbers),
/// created on the first call and the same array on every later one. The fast paths
/// write their numbers into it; the TypeScript layer reads them right after each call.
#[napi(js_name = "scratch", ts_return_type = "Float64Array")]
pub fn scratch(env: Env) -> Result<RawValue> {
    crate::errors::guard(|| {
        let raw_env = env.raw();
        let (_, _, reference) = SCRATCH.with(Cell::get);
        if !reference.is_null() {
            let mut buffer = ptr::null_mut();
            // SAFETY: the reference was made in this environment (the cleanup hook clears
            // it when the environment goes away).
            status(
                unsafe { sys::napi_get_reference_value(raw_env, reference, &mut buffer) },
                "reading the scratch",
            )?;
            let mut array = ptr::null_mut();
            // SAFETY: `buffer` is the scratch's ArrayBuffer, `SCRATCH_LEN` doubles long.
            status(
                unsafe {
                    sys::napi_create_typedarray(
                        raw_env,
                        sys::TypedarrayType::float64_array,
                        SCRATCH_LEN,
                        buffer,
                        0,
                        &mut array,
                    )
                },
                "making the scratch",
            )?;
            return Ok(RawValue(array));
        }
        let mut data: *mut c_void = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        let bytes = SCRATCH_LEN * std::mem::size_of::<f64>();
        // SAFETY: N-API allocates `bytes` bytes (8-aligned: V8 backing stores are) and
        // reports where; the memory lives as long as the ArrayBuffer.
        status(
            unsafe { sys::napi_create_arraybuffer(raw_env, bytes, &mut data, &mut buffer) },
            "making the scratch",
        )?;
        let mut array = ptr::null_mut();
        // SAFETY: `buffer` was just made, `bytes` long.
        status(
            unsafe {
                sys::napi_create_typedarray(
                    raw_env,
                    sys::TypedarrayType::float64_array,
                    SCRATCH_LEN,
                    buffer,
                    0,
                    &mut array,
                )
            },
            "making the scratch",
        )?;
        let mut reference = ptr::null_mut();
        // SAFETY: a strong reference keeps the ArrayBuffer (and its memory) alive for the
        // environment's lifetime; the cleanup hook forgets the pointer before it goes.
        status(
            unsafe { sys::napi_create_reference(raw_env, buffer, 1, &mut reference) },
            "keeping the scratch",
        )?;
        // SAFETY: registering a plain function without state.
        #[cfg(not(target_family = "wasm"))]
        status(
            unsafe {
                sys::napi_add_env_cleanup_hook(raw_env, Some(forget_scratch), ptr::null_mut())
            },
            "registering the scratch cleanup",
        )?;
        #[cfg(target_family = "wasm")]
        SCRATCH_ENV.with(|e| e.set(raw_env));
        if data.is_null() || (data as usize) % std::mem::align_of::<f64>() != 0 {
            return Err(Error::from_reason("the scratch memory is not usable"));
        }
        SCRATCH.with(|s| s.set((data.cast::<f64>(), SCRATCH_LEN, reference)));
        Ok(RawValue(array))
    })
}

/// Writes numbers into the scratch from index 0 on; writes beyond its end are dropped
/// (and reported by [`Out::fits`]).
pub struct Out {
    ptr: *mut f64,
    len: usize,
    /// WebAssembly: one past the highest index written (synced to JS on drop).
    #[cfg(target_family = "wasm")]
    end: Cell<usize>,
}

impl Out {
    /// The scratch of this thread (empty before [`scratch`] ran: every write is dropped).
    pub fn new() -> Self {
        let (ptr, len, _) = SCRATCH.with(Cell::get);
        Out {
            ptr,
            len,
            #[cfg(target_family = "wasm")]
            end: Cell::new(0),
        }
    }

    /// Whether `n` numbers from index `at` fit.
    pub fn fits(&self, at: usize, n: usize) -> bool {
        !self.ptr.is_null() && at.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// Write `value` at `index` (dropped beyond the end).
    pub fn put(&self, index: usize, value: f64) {
        if self.fits(index, 1) {
            // SAFETY: `index < len`, the scratch's memory is live (its ArrayBuffer is
            // referenced) and only this thread's JS reads it, after the call returns.
            unsafe { self.ptr.add(index).write(value) };
            #[cfg(target_family = "wasm")]
            self.end.set(self.end.get().max(index + 1));
        }
    }
}

#[cfg(target_family = "wasm")]
impl Drop for Out {
    /// Copy the numbers written into the JS scratch array (see the module docs).
    fn drop(&mut self) {
        let end = self.end.get();
        let (_, _, reference) = SCRATCH.with(Cell::get);
        let env = SCRATCH_ENV.with(Cell::get);
        if end == 0 || reference.is_null() || env.is_null() {
            return;
        }
        let mut buffer = ptr::null_mut();
        // SAFETY: the reference and the environment were made together by `scratch`, and
        // the page's environment lives as long as the module; `end <= len`. The status is
        // not checked: emnapi refuses only a value that is no ArrayBuffer (the reference
        // holds the scratch's) and a drop cannot report; the conformance suite runs every
        // fast path through this copy in a browser (tests/browser/).
        unsafe {
            if sys::napi_get_reference_value(env, reference, &mut buffer) == sys::Status::napi_ok {
                let _ = emnapi_sync_memory(
                    env,
                    false,
                    &mut buffer,
                    0,
                    end * std::mem::size_of::<f64>(),
                );
            }
        }
    }
}

/// UTF-16 offsets of the byte offsets `at` (ascending, on character boundaries) in
/// `text`: the JS string indices of the same positions.
pub fn utf16_offsets<const N: usize>(text: &str, at: [usize; N]) -> [usize; N] {
    if text.is_ascii() {
        return at;
    }
    let mut out = at;
    let mut units = 0usize;
    let mut next = 0usize;
    for (byte, ch) in text.char_indices() {
        while next < N && at.get(next).is_some_and(|&p| p <= byte) {
            if let Some(o) = out.get_mut(next) {
                *o = units;
            }
            next += 1;
        }
        if next == N {
            return out;
        }
        units += ch.len_utf16();
    }
    while next < N {
        if let Some(o) = out.get_mut(next) {
            *o = units;
        }
        next += 1;
    }
    out
}
