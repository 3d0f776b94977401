//! The machines a driver can run: the current version of each, by id, and every version
//! a deploy retains, by id and [version](stm_core::version).
//!
//! A new execution starts on the current version and is pinned to it
//! (`Execution::definition_version`); a pinned execution steps on its version for as
//! long as it is retained here, and an unpinned one (as harel writes it) on the current
//! version of its `definition_id`.

use std::sync::Arc;
use stm_core::FastMap;

use stm_core::version::{assign_versions, version_of, FrozenVersion, Version};
use stm_core::Definition;

/// The definitions a driver can run. Inline submachines and imported machines are
/// registered under their synthetic ids / FQNs too, each with its own version.
///
/// ```
/// use stm_runtime::Definitions;
///
/// let v1 = stm_core::dsl::load_definition_str("machine M {\n  initial A\n  state A {}\n}\n", None, None).expect("valid");
/// let v2 = stm_core::dsl::load_definition_str("machine M {\n  initial B\n  state B {}\n}\n", None, None).expect("valid");
/// let frozen_v1 = stm_core::version::FrozenVersion::new(&v1, None);
/// let mut definitions = Definitions::new();
/// let current = definitions.register(v2);
/// definitions.retain(frozen_v1.clone());
/// assert_eq!(definitions.get("M").map(|d| d.version.clone()), Some(current.version.clone()));
/// let old = definitions.get_version("M", frozen_v1.version).expect("retained");
/// assert!(old.get("A").is_some());
/// assert!(definitions.get("M").expect("current").get("A").is_none());
/// ```
#[derive(Debug, Default, Clone)]
pub struct Definitions {
    current: FastMap<String, Arc<Definition>>,
    /// definition id -> version -> that version, the current ones included (nested, so a
    /// step's lookup borrows its two keys instead of building a pair).
    versions: FastMap<String, FastMap<Version, Arc<Definition>>>,
    /// version -> its frozen label
    labels: FastMap<Version, String>,
}

impl Definitions {
    pub fn new() -> Self {
        Definitions::default()
    }

    /// Register `defn` as the current version of its machine, with every submachine it
    /// carries (a submachine already registered as current keeps its place).
    pub fn register(&mut self, mut defn: Definition) -> Arc<Definition> {
        assign_versions(&mut defn);
        for (id, sub) in &defn.submachines {
            let sub = self.add_version(sub.clone());
            self.current.entry(id.clone()).or_insert(sub);
        }
        let arc = self.add_version(defn);
        self.current.insert(arc.id.clone(), arc.clone());
        arc
    }

    /// Keep `frozen` runnable for the executions pinned to it, without making it
    /// current. Retaining the current version again changes nothing.
    pub fn retain(&mut self, frozen: FrozenVersion) -> Arc<Definition> {
        let mut defn = frozen.definition;
        assign_versions(&mut defn);
        if let (Some(label), Some(version)) = (frozen.label, defn.version) {
            self.labels.insert(version, label);
        }
        for sub in defn.submachines.values() {
            self.add_version(sub.clone());
        }
        self.add_version(defn)
    }

    /// `defn`, its version assigned, among the versions of its machine.
    fn add_version(&mut self, defn: Definition) -> Arc<Definition> {
        let version = defn.version.unwrap_or_else(|| version_of(&defn));
        self.versions
            .entry(defn.id.clone())
            .or_default()
            .entry(version)
            .or_insert_with(|| Arc::new(defn))
            .clone()
    }

    /// The current version of machine `id`.
    pub fn get(&self, id: &str) -> Option<&Arc<Definition>> {
        self.current.get(id)
    }

    /// Version `version` of machine `id`, current or retained.
    pub fn get_version(&self, id: &str, version: Version) -> Option<&Arc<Definition>> {
        // most executions are on the current version: one lookup
        match self.current.get(id) {
            Some(current) if current.version == Some(version) => Some(current),
            _ => self.versions.get(id)?.get(&version),
        }
    }

    /// The label `stm versions freeze --label` gave `version`, if any.
    pub fn label(&self, version: Version) -> Option<&str> {
        self.labels.get(&version).map(String::as_str)
    }

    /// The current version of each machine.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Definition>> {
        self.current.values()
    }

    /// Every version, current and retained (what a cold start validates).
    pub(crate) fn all_versions(&self) -> impl Iterator<Item = &Arc<Definition>> {
        self.versions.values().flat_map(FastMap::values)
    }

    /// The versions of machine `id` this holds (current and retained), in no order.
    pub fn versions_of(&self, id: &str) -> impl Iterator<Item = &Arc<Definition>> {
        self.versions.get(id).into_iter().flat_map(FastMap::values)
    }

    /// How many machines have a current version.
    pub fn len(&self) -> usize {
        self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }
}
