//! Rendering a [`Definition`](crate::Definition) as a diagram, with the same text
//! harel 0.9.0's `viz/` renderers produce: [`plantuml`] (harel's default) and
//! [`mermaid`] (a `stateDiagram-v2`). Both take the chart from one walk (`walk`: the
//! scopes, their children and what each transition draws), write guards and effects
//! alike (`label`), and lay out their own format; [`arrows`] lists the same walk's
//! edges for the web console.

mod arrows;
mod label;
mod mermaid;
mod plantuml;
mod walk;

pub use arrows::{arrows, Arrow};
pub(crate) use label::{effect_text, predicate_label};
pub use mermaid::mermaid;
pub use plantuml::plantuml;
