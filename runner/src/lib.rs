//! I/O shell pieces shared by the `stapel-runner` and `fake-harness` binaries.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod supervisor;
