//! Helpers shared by the integration tests (`mod common;` in each test file).
// Each test file uses its own part of the helpers.
#![allow(dead_code)]

pub mod session;
