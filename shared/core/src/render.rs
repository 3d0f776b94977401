//! Rendering a [`Definition`](crate::Definition) as a Mermaid `stateDiagram-v2`.
