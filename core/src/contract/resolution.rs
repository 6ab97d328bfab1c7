//! Profile resolution: from an [`ExecutionRequest::harness_profile_ref`](super::ExecutionRequest)
//! and a [`Catalog`] to one approved (profile, rein) pair — or a [`Refusal`]. Resolution
//! always happens before any sandbox exists.
//!
//! # Refusals, in the order they are checked
//!
//! | kind | reasons | when |
//! |---|---|---|
//! | `unknown` | `profile_not_found` | no profile has `profile_id == harness_profile_ref` |
//! | `ambiguous` | `duplicate_profile`, `duplicate_rein` | more than one profile has that id, or more than one rein descriptor has the profile's `rein` id |
//! | `disabled` | `profile_disabled` | the profile has `enabled: false` |
//! | `incompatible` | `profile_contract_version`, `rein_not_found`, `rein_contract_version` | the profile or its rein does not declare exactly [`CONTRACT_VERSION`], or no descriptor exists for the profile's rein |
//! | `unsafe` | see below | the profile (or its rein descriptor) could leak or over-grant |
//!
//! Within the first kind that applies, every reason found is listed (sorted, unique).
//!
//! # What makes a profile unsafe
//!
//! * `wildcard_tool_policy` — an `allowed_tools` entry consisting only of `*` (allow
//!   everything). A profile must list the tools it grants.
//! * `credential_ref_not_reference` — a `credential_refs` entry that is not a
//!   credential-route reference `scheme:name` (see
//!   [`is_credential_reference`]); a pasted key is
//!   inline credential material.
//! * `inline_credential` — any other string field of the profile (`profile_id`, `rein`,
//!   `model`, `sandbox_profile`, an allowed tool name) shaped like credential material.
//! * `sensitive_profile_metadata` / `sensitive_rein_metadata` — the profile's or the rein
//!   descriptor's `metadata` carries a sensitive key or a credential-shaped value.
//!
//! The definitions of "sensitive key" and "credential-shaped" live in
//! [`safety`](super::safety).

use serde_json::Value;

use super::error::ContractError;
use super::fields::Obj;
use super::models::{HarnessProfile, ReinDescriptor, CONTRACT_VERSION};
use super::safety::{find_sensitive, is_credential_reference, looks_like_credential};

/// The profiles and rein descriptors a gateway may resolve against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// Known harness profiles.
    pub profiles: Vec<HarnessProfile>,
    /// Known rein descriptors.
    pub reins: Vec<ReinDescriptor>,
}

impl Catalog {
    /// Parse `{"profiles": [HarnessProfile…], "reins": [ReinDescriptor…]}` strictly (both
    /// keys optional, default empty).
    ///
    /// # Errors
    /// The first violation, located like `profiles/0/tool_policy`.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        let o = Obj::open("Catalog", "", value, &["profiles", "reins"])?;
        Ok(Self {
            profiles: o.list("profiles", HarnessProfile::parse_at)?,
            reins: o.list("reins", ReinDescriptor::parse_at)?,
        })
    }
}

/// Why a profile was refused. Codes are the seed's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// No such profile. Code `unknown`.
    Unknown,
    /// The profile is disabled. Code `disabled`.
    Disabled,
    /// The reference does not select exactly one profile and rein. Code `ambiguous`.
    Ambiguous,
    /// Contract versions do not match exactly, or the rein is missing. Code
    /// `incompatible`.
    Incompatible,
    /// The profile could leak secrets or over-grant tools. Code `unsafe`.
    Unsafe,
}

impl RefusalKind {
    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            RefusalKind::Unknown => "unknown",
            RefusalKind::Disabled => "disabled",
            RefusalKind::Ambiguous => "ambiguous",
            RefusalKind::Incompatible => "incompatible",
            RefusalKind::Unsafe => "unsafe",
        }
    }
}

/// A refused resolution: the kind and every reason of that kind (sorted, unique).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile refused ({}): {}", kind.code(), reasons.join(", "))]
pub struct Refusal {
    /// The refusal kind.
    pub kind: RefusalKind,
    /// Machine-readable reason codes (see the module docs).
    pub reasons: Vec<&'static str>,
}

impl Refusal {
    fn new(kind: RefusalKind, mut reasons: Vec<&'static str>) -> Self {
        reasons.sort_unstable();
        reasons.dedup();
        Self { kind, reasons }
    }

    /// Stable code: the kind's code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

/// A successful resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The selected profile.
    pub profile: HarnessProfile,
    /// Its rein.
    pub rein: ReinDescriptor,
}

/// Every unsafe-profile reason (see the module docs); empty when the pair is safe.
pub fn unsafe_reasons(profile: &HarnessProfile, rein: &ReinDescriptor) -> Vec<&'static str> {
    let mut out = Vec::new();
    let p = &profile.tool_policy.allowed_tools;
    if p.iter()
        .any(|t| !t.is_empty() && t.chars().all(|c| c == '*'))
    {
        out.push("wildcard_tool_policy");
    }
    if profile
        .credential_refs
        .iter()
        .any(|r| !is_credential_reference(r))
    {
        out.push("credential_ref_not_reference");
    }
    let fields = [
        &profile.profile_id,
        &profile.rein,
        &profile.model,
        &profile.sandbox_profile,
    ];
    if fields.iter().any(|s| looks_like_credential(s)) || p.iter().any(|t| looks_like_credential(t))
    {
        out.push("inline_credential");
    }
    if find_sensitive(&Value::Object(profile.metadata.clone())).is_some() {
        out.push("sensitive_profile_metadata");
    }
    if find_sensitive(&Value::Object(rein.metadata.clone())).is_some() {
        out.push("sensitive_rein_metadata");
    }
    out.sort_unstable();
    out
}

/// Resolve `harness_profile_ref` against `catalog` (see the module docs for the order of
/// checks).
///
/// # Errors
/// A [`Refusal`] naming the first kind that applies and all its reasons.
pub fn resolve(harness_profile_ref: &str, catalog: &Catalog) -> Result<Resolved, Refusal> {
    let profiles: Vec<&HarnessProfile> = catalog
        .profiles
        .iter()
        .filter(|p| p.profile_id == harness_profile_ref)
        .collect();
    let profile = match profiles.as_slice() {
        [] => {
            return Err(Refusal::new(
                RefusalKind::Unknown,
                vec!["profile_not_found"],
            ))
        }
        [one] => *one,
        _ => {
            return Err(Refusal::new(
                RefusalKind::Ambiguous,
                vec!["duplicate_profile"],
            ))
        }
    };
    let reins: Vec<&ReinDescriptor> = catalog
        .reins
        .iter()
        .filter(|r| r.rein_id == profile.rein)
        .collect();
    if reins.len() > 1 {
        return Err(Refusal::new(RefusalKind::Ambiguous, vec!["duplicate_rein"]));
    }
    if !profile.enabled {
        return Err(Refusal::new(
            RefusalKind::Disabled,
            vec!["profile_disabled"],
        ));
    }
    let mut incompatible = Vec::new();
    if profile.contract_version != CONTRACT_VERSION {
        incompatible.push("profile_contract_version");
    }
    let rein = reins.first().copied();
    match rein {
        None => incompatible.push("rein_not_found"),
        Some(r) if r.contract_version != CONTRACT_VERSION => {
            incompatible.push("rein_contract_version")
        }
        Some(_) => {}
    }
    // A missing rein is in `incompatible`, so a rein is present whenever it is empty.
    let (true, Some(rein)) = (incompatible.is_empty(), rein) else {
        return Err(Refusal::new(RefusalKind::Incompatible, incompatible));
    };
    let unsafe_ = unsafe_reasons(profile, rein);
    if !unsafe_.is_empty() {
        return Err(Refusal::new(RefusalKind::Unsafe, unsafe_));
    }
    Ok(Resolved {
        profile: profile.clone(),
        rein: rein.clone(),
    })
}
