//! The seven fake-harness scripts of the local runner, built into the binaries (their
//! source files live in `conformance/fixtures/paperclip-scripts/`, linked here as
//! `runner/assets/fake-scripts` so the published crate carries them).

use stapel_runner_protocol::local::Script;

macro_rules! scripts {
    ($($name:literal),*) => {
        /// `(name, JSON text)` of every built-in script.
        pub const BUILT_IN: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../assets/fake-scripts/", $name, ".json")))),*
        ];
    };
}
scripts!(
    "happy-path",
    "permission-input",
    "interrupted",
    "error",
    "duplicate-terminal",
    "linger",
    "oversized-line"
);

/// The script named `name_or_path`: a built-in name, or else a path to a script file.
///
/// # Errors
/// A message naming the problem (unknown name, unreadable file, invalid script).
pub fn load(name_or_path: &str) -> Result<Script, String> {
    let text = match BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
        Some((_, text)) => (*text).to_owned(),
        None => std::fs::read_to_string(name_or_path).map_err(|e| {
            let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
            format!(
                "{name_or_path}: not a built-in script ({}) and not readable: {e}",
                names.join(", ")
            )
        })?,
    };
    Script::parse(&text).map_err(|e| format!("{name_or_path}: invalid script: {e}"))
}

/// `true` when the script waits for an operator interrupt (`await_interrupt`).
pub fn awaits_interrupt(script: &Script) -> bool {
    script
        .steps
        .iter()
        .any(|s| matches!(s, stapel_runner_protocol::local::ScriptStep::AwaitInterrupt))
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_built_in_scripts_load_and_are_named_after_their_file() {
        for (name, _) in super::BUILT_IN {
            let s = super::load(name).unwrap();
            assert_eq!(s.name, *name);
        }
    }
}
