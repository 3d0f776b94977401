//! What the template tests share: the functions' logical ids, and a resource's property.

use serde_json::Value;
use stm_deploytest::template::Template;

pub(crate) const FUNCTIONS: [&str; 3] = ["Worker", "Relay", "Sweeper"];

pub(crate) fn prop<'a>(t: &'a Template, id: &str, name: &str) -> &'a Value {
    &t.properties(id).unwrap_or_else(|e| panic!("{e}"))[name]
}
