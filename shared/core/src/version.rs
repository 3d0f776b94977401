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
//! assert_eq!((back.version, back.definition.id.as_str()), (frozen.version, "M"));
//! assert_eq!(frozen.version.to_string().len(), 16);
//! assert_eq!(frozen.version.to_string().parse::<stm_core::version::Version>(), Ok(frozen.version));
//! ```

pub mod diff;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Definition;

/// The folder, beside the `.stm` files, that holds the frozen versions a deploy retains.
pub const VERSIONS_DIR: &str = "versions";

/// What the frozen file's `format` says; a reader refuses any other.
pub const FROZEN_FORMAT: u32 = 1;

/// A definition's version: 64 bits of the SHA-256 of its compiled form, written (in
/// pins, file names, messages) as 16 lowercase hex digits. `Copy`: an execution's pin
/// costs nothing to clone, compare or hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(u64);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Version({self})")
    }
}

/// Text that is not a version: what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a version: a version is 16 hex digits, as `stm validate` prints them")]
pub struct NotAVersion(pub String);

impl std::str::FromStr for Version {
    type Err = NotAVersion;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let well_formed = text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit());
        match u64::from_str_radix(text, 16) {
            Ok(bits) if well_formed => Ok(Version(bits)),
            _ => Err(NotAVersion(text.to_string())),
        }
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `defn`'s version: a content hash of its compiled form.
pub fn version_of(defn: &Definition) -> Version {
    let mut hasher = Sha256::new();
    // the format is hashed too: a change to the compiled form is a new version space
    hasher.update(format!("stm-definition/{FROZEN_FORMAT}\n").as_bytes());
    // serializing a Definition cannot fail: every map key is a string
    hasher.update(serde_json::to_vec(defn).unwrap_or_default());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Version(u64::from_be_bytes(first))
}

/// Compute and record the version of `defn` and of each of its submachines (an invoked
/// machine's child execution is pinned to the submachine's own version).
pub fn assign_versions(defn: &mut Definition) {
    for sub in defn.submachines.values_mut() {
        assign_versions(sub);
    }
    defn.version = Some(version_of(defn));
}

/// The file name of `machine`'s frozen `version`: `Order@1f2e3d4c5b6a7988.json`.
pub fn frozen_file_name(machine: &str, version: Version) -> String {
    format!("{machine}@{version}.json")
}

/// One retained version: a machine's compiled form, with its version and an optional
/// human label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenVersion {
    pub format: u32,
    pub machine: String,
    pub version: Version,
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
