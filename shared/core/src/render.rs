//! Rendering a [`Definition`](crate::Definition) as a diagram, with the same text
//! harel 0.9.0's `viz/` renderers produce: [`plantuml`] (harel's default) and
//! [`mermaid`] (a `stateDiagram-v2`). Both write guards and effects alike
//! (`label`); each file lays out its own format.

mod arrows;
mod label;
mod mermaid;
mod plantuml;

pub use arrows::{arrows, Arrow};
pub(crate) use label::{effect_text, predicate_label};
pub use mermaid::mermaid;
pub use plantuml::plantuml;
