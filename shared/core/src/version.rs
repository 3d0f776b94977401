//! Definition versions: what a deploy's machine *is*, as a content hash, and the frozen
//! file that keeps an earlier one deployable.
//!
//! A version is the first 16 hex digits of the SHA-256 of the compiled
//! [`Definition`]'s canonical JSON: the machine and every machine it imports or inlines
//! (they are its `submachines`), without source positions or the file name, so comments,
//! formatting and where the file lives do not change it; a renamed state, a new
//! transition, a rebound action or another context default do.
//!
//! A frozen version ([`FrozenVersion`]) is that compiled form written to a file named
//! after the machine and its version. Reading one recomputes the hash and refuses a
//! file whose content does not match its name: content addressing is what lets a pin
//! name a version without anything else to trust.
//!
//! ```
//! let v1 = stm_core::dsl::load_definition_str("machine M {\n  initial A\n  state A {}\n}\n", None, None).expect("valid");
//! let reformatted = stm_core::dsl::load_definition_str("# a comment\nmachine M { initial A  state A {} }\n", None, None).expect("valid");
//! assert_eq!(stm_core::version::version_of(&v1), stm_core::version::version_of(&reformatted));
//!
//! let frozen = stm_core::version::FrozenVersion::new(&v1, Some("first".into()));
//! let text = frozen.to_text();
//! let back = stm_core::version::FrozenVersion::from_text(&text).expect("reads back");
//! assert_eq!((back.version.as_str(), back.definition.id.as_str()), (frozen.version.as_str(), "M"));
//! ```

pub mod diff;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Definition;

/// The folder, beside the `.stm` files, that holds the frozen versions a deploy retains.
pub const VERSIONS_DIR: &str = "versions";

/// What the frozen file's `format` says; a reader refuses any other.
pub const FROZEN_FORMAT: u32 = 1;

/// Hex digits of a version: 64 bits, plenty to tell a machine's versions apart.
const VERSION_DIGITS: usize = 16;

/// `defn`'s version: a content hash of its compiled form.
pub fn version_of(defn: &Definition) -> String {
    let mut hasher = Sha256::new();
    // the format is hashed too: a change to the compiled form is a new version space
    hasher.update(format!("stm-definition/{FROZEN_FORMAT}\n").as_bytes());
    // serializing a Definition cannot fail: every map key is a string
    hasher.update(serde_json::to_vec(defn).unwrap_or_default());
    let digest = hasher.finalize();
    digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(VERSION_DIGITS)
        .map(|d| char::from_digit(u32::from(d), 16).unwrap_or('0'))
        .collect()
}

/// Compute and record the version of `defn` and of each of its submachines (an invoked
/// machine's child execution is pinned to the submachine's own version).
pub fn assign_versions(defn: &mut Definition) {
    for sub in defn.submachines.values_mut() {
        assign_versions(sub);
    }
    defn.version = Some(version_of(defn));
}

/// Whether `text` has the shape of a version (16 lowercase hex digits).
pub fn is_version(text: &str) -> bool {
    text.len() == VERSION_DIGITS
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The file name of `machine`'s frozen `version`: `Order@1f2e3d4c5b6a7988.json`.
pub fn frozen_file_name(machine: &str, version: &str) -> String {
    format!("{machine}@{version}.json")
}

/// One retained version: a machine's compiled form, with its version and an optional
/// human label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenVersion {
    pub format: u32,
    pub machine: String,
    pub version: String,
    /// A human name for it (`--label`), shown beside the hash.
    #[serde(default)]
    pub label: Option<String>,
    /// The `.stm` file it was frozen from, for people reading the folder.
    #[serde(default)]
    pub frozen_from: Option<String>,
    pub definition: Definition,
}

impl FrozenVersion {
    /// `defn` frozen as it is now.
    pub fn new(defn: &Definition, label: Option<String>) -> Self {
        FrozenVersion {
            format: FROZEN_FORMAT,
            machine: defn.id.clone(),
            version: version_of(defn),
            label,
            frozen_from: defn.source_file.clone(),
            definition: defn.clone(),
        }
    }

    /// The file's text (pretty JSON, so a review can read what a deploy retains).
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Read a frozen file back: its format is this one, its definition is whole, and its
    /// content hashes to the version it names.
    pub fn from_text(text: &str) -> Result<Self, FrozenError> {
        let mut frozen: FrozenVersion = serde_json::from_str(text).map_err(FrozenError::NotFrozen)?;
        if frozen.format != FROZEN_FORMAT {
            return Err(FrozenError::Format(frozen.format));
        }
        frozen.definition.rebuild_index();
        frozen.definition.check_arena().map_err(FrozenError::Broken)?;
        let actual = version_of(&frozen.definition);
        if actual != frozen.version || frozen.definition.id != frozen.machine {
            return Err(FrozenError::Mismatch {
                named: format!("{}@{}", frozen.machine, frozen.version),
                actual: format!("{}@{actual}", frozen.definition.id),
            });
        }
        Ok(frozen)
    }
}

/// Why a frozen version cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrozenError {
    #[error("not a frozen version ({0}): write it with `stm versions freeze`")]
    NotFrozen(#[source] serde_json::Error),
    #[error("frozen format {0} is not this stm's ({FROZEN_FORMAT}): freeze it again with this stm from its source")]
    Format(u32),
    #[error("the compiled machine is incomplete ({0}): freeze it again from its source")]
    Broken(String),
    #[error("its content is {actual}, not the {named} it names: it was edited after freezing; freeze it again from its source")]
    Mismatch { named: String, actual: String },
}
